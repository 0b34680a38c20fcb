"""`harness tune FILE [--plan | --out DIR | --resume DIR]`: the tuning guides' procedure."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from harness.errors import UserError
from harness.results.lock import lock_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="walk the tuning guide's procedure one flag at a time and recommend flags, with reasons",
        description="Run a tune file: context length, memory, baseline, scheduler, caches, speculation, final "
        "comparison; every measurement is a sweep. See docs/tune.md and scenarios/tune/.",
    )
    p.add_argument("file", help="tune YAML file")
    p.add_argument("--plan", action="store_true", help="print the steps it will take; start nothing")
    p.add_argument("--out", metavar="DIR", help="tune directory (default results/tune/<name>-<time>)")
    p.add_argument("--resume", metavar="DIR", help="continue the tune in DIR: finished cells are kept, the rest run")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier tune's baseline of the same name (tune-<name>) with this tune's final run "
        "(default: keep the earlier one and say so)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from harness.cli.sweep import _signals_to_interrupt
    from harness.tune.driver import Tuner
    from harness.tune.load import load_tune
    from harness.tune.render import render_plan

    spec = load_tune(args.file)
    if args.plan:
        print(render_plan(spec))
        return 0
    if args.resume and args.out:
        raise UserError("--out and --resume: give one; --resume DIR continues the tune in DIR")
    if args.resume:
        out = Path(args.resume)
        # tune.yaml is written first: a tune stopped before its first step landed (no tune.json yet)
        # resumes too (audit R6: it could be neither resumed nor restarted)
        if not (out / "tune.json").is_file() and not (out / "tune.yaml").is_file():
            raise UserError(f"--resume {out}: no tune.json or tune.yaml there; give the directory of an earlier tune")
        lock_dir(out, "--resume", "tune directory")  # one writer at a time (harness.results.lock)
    else:
        out = (
            Path(args.out)
            if args.out
            else Path("results") / "tune" / f"{spec.file.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        )
        lock_dir(out, "--out", "tune directory")
        if any(out.iterdir()):
            raise UserError(f"--out {out}: not empty; choose a new directory, or continue it with --resume {out}")
    _signals_to_interrupt()
    outcome = Tuner(spec, out, resume=bool(args.resume), show_progress=not args.quiet, force=args.force).run()
    doc = outcome.doc
    for s in doc.steps:
        print(f"{s.step:<24} {s.verdict:<8} {s.reason}")
    fin = doc.final
    vs = fin.vs_baseline.verdict if fin.vs_baseline is not None else "not compared"
    print(f"recommended: {json.dumps(fin.flags)}  (vs baseline: {vs})")
    c = doc.cost
    print(f"cost: {c.engine_starts} engine starts, {c.measured_s / 60:.1f} measured min, {c.wall_s / 60:.1f} wall min")
    print(f"results: {out}/tune.json, {out}/report.html, {out}/recommended.yaml")
    if outcome.interrupted:
        print(
            f"interrupted: finished cells are kept; continue with: harness tune {args.file} --resume {out}",
            file=sys.stderr,
        )
    return outcome.exit_code
