"""`harness sim [vLLM-style flags]`: run the simulated engine in the foreground."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim",
        help="run the built-in simulated engine (vLLM-like flags; see `harness sim --help`)",
        add_help=False,
    )
    p.set_defaults(func=_run, passthrough=True)


def _run(args: argparse.Namespace) -> int:
    from harness.sim.cli import main as sim_main

    return sim_main(args.rest)
