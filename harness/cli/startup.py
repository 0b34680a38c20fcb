"""`harness startup FILE [--plan | --out DIR | --resume DIR]`: cold and warm engine starts by phase."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.errors import UserError
from harness.results.lock import lock_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "startup",
        help="time cold and warm engine starts by phase per flag config (and the scenario after the warm start)",
        description="Run a startup file: per config, N cold starts (empty compile caches) and M warm starts "
        "(caches kept), each to ready and stopped; phases from the engine log. See docs/startup.md.",
    )
    p.add_argument("file", help="startup YAML file (engine, base, vary, cold, warm, scenario)")
    p.add_argument("--plan", action="store_true", help="print the configs and their command lines; start nothing")
    p.add_argument("--out", metavar="DIR", help="output directory (default results/startup/<name>-<time>)")
    p.add_argument("--resume", metavar="DIR", help="continue in DIR: finished starts are kept, the rest run")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from harness.cli.sweep import _signals_to_interrupt
    from harness.startup.execute import StartupOptions, run_startup
    from harness.startup.plan import build_startup_plan, render_plan
    from harness.startup.results import console_table

    plan = build_startup_plan(args.file)
    if args.plan:
        print(render_plan(plan))
        return 0
    if args.resume and args.out:
        raise UserError("--out and --resume: give one; --resume DIR continues the startup benchmark in DIR")
    if args.resume:
        out = Path(args.resume)
        if not (out / "startup.json").is_file():
            raise UserError(f"--resume {out}: no startup.json there; give the directory of an earlier harness startup")
        lock_dir(out, "--resume", "startup directory")  # one writer at a time (harness.results.lock)
    else:
        out = (
            Path(args.out)
            if args.out
            else Path("results") / "startup" / f"{plan.spec.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        )
        lock_dir(out, "--out", "startup directory")
        if any(out.iterdir()):
            raise UserError(f"--out {out}: not empty; choose a new directory, or continue it with --resume {out}")
    _signals_to_interrupt()
    results = run_startup(
        plan,
        StartupOptions(
            out_dir=out,
            resume=bool(args.resume),
            show_progress=not args.quiet,
            write_report=not args.no_report,
            stream=sys.stderr,
        ),
    )
    print(console_table(results))
    print(f"results: {out}/startup.json")
    if results.interrupted:
        print(
            f"interrupted: finished starts are kept; continue with: harness startup {args.file} --resume {out}",
            file=sys.stderr,
        )
        return 130
    counts = results.counts()
    if counts["failed"]:
        print(
            f"error: {counts['failed']} start(s) failed (reasons above and in {out}/startup.json; logs in {out}/logs/)",
            file=sys.stderr,
        )
        return 1
    return 0
