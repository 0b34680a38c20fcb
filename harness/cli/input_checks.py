"""Checks of `harness run`'s own flags before anything starts: one `error:` line naming the flag.

Before these, `--target not-a-url` and an unbalanced quote in `--sim-args` ended as exit 70
("internal error"), `--target ftp://...` and port 99999 read as "Connection refused",
`--processes 500` forked 500 load processes on two cores, and `--engine-kind bogus` was taken
silently (telemetry then guessed).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from harness.errors import UserError
from harness.limits import check_processes
from harness.scenario.checks import check_url


def check_target_flag(url: str | None, flag: str = "--target") -> None:
    if url is None:
        return
    try:
        check_url(url, "base URL")
    except ValueError as exc:
        raise UserError(f"{flag}: {exc}") from None


def sim_args(text: str, flag: str = "--sim-args") -> list[str]:
    """The simulated engine's flags, split as a shell would (quotes), or a one-line error."""
    try:
        return shlex.split(text or "")
    except ValueError as exc:
        raise UserError(f"{flag} {text!r}: {exc} (quote values the way a shell would)") from None


def engine_kinds() -> list[str]:
    from harness.engines import run_kind_names

    return run_kind_names()


def check_engine_kind(kind: str | None) -> None:
    if kind is not None and kind not in engine_kinds():
        raise UserError(
            f"--engine-kind {kind!r}: not an engine kind; use one of {', '.join(engine_kinds())} "
            "(or leave it out: the profile is detected from /metrics)"
        )


def check_out_dir(out: Path | None) -> None:
    """--out must be a directory or creatable as one; a file or an unwritable place is named."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file, not a directory; give a directory for the run's files")
    parent = next((p for p in [out, *out.parents] if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UserError(f"--out {out}: {parent} is a file, not a directory")


def check_run_flags(args: argparse.Namespace) -> list[str]:
    """Every flag check that needs no scenario; returns the simulated engine's argv."""
    check_target_flag(getattr(args, "target", None))
    check_engine_kind(getattr(args, "engine_kind", None))
    check_out_dir(getattr(args, "out", None))
    processes = getattr(args, "processes", 1)
    if processes and processes > 1:
        check_processes(processes, "--processes")
    distributed = getattr(args, "distributed", 0)
    if distributed and distributed > 0 and not getattr(args, "remote_workers", False):
        check_processes(distributed, "--distributed")  # local workers: this machine's cores
    return sim_args(getattr(args, "sim_args", ""))
