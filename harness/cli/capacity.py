"""`harness capacity SCENARIO [--target URL]`: search the highest load that meets the SLOs."""

from __future__ import annotations

import argparse
import math
import shlex
import signal
import sys
import time
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "capacity",
        help="search the highest request rate (or concurrency) at which enough requests meet the SLOs",
        description="Bracket, then bisect the scenario's load level (open loop: rate; closed loop: concurrency) "
        "until the boundary is within --precision. Every trial is a run directory; over-saturated trials stop "
        "early. See docs/capacity.md.",
    )
    p.add_argument("scenario", help="scenario YAML file (needs an slo)")
    p.add_argument("--target", help="base URL of an OpenAI-compatible server (default: start the simulated engine)")
    p.add_argument("--model", help="model name (default: the first one /v1/models lists)")
    p.add_argument("--out", type=Path, help="search directory (default: results/capacity/<name>-<UTC time>)")
    p.add_argument("--knob", choices=["rate", "concurrency"], help="what to search (default: the scenario's load mode)")
    p.add_argument("--start", type=float, help="first level tried (default: the scenario's rate or concurrency)")
    p.add_argument("--max-level", type=float, help="never try above this level")
    p.add_argument(
        "--attainment",
        type=float,
        default=0.95,
        help="share of requests that must meet every SLO for a level to pass (default 0.95)",
    )
    p.add_argument(
        "--precision", type=float, default=0.05, help="stop when (fail - pass) / fail <= this (default 0.05)"
    )
    p.add_argument("--max-trials", type=int, default=12, help="trial budget (default 12)")
    p.add_argument("--duration", type=float, help="measured window of each trial in seconds")
    p.add_argument("--warmup", type=float, help="warmup seconds of each trial")
    p.add_argument("--no-early-stop", action="store_true", help="run every trial to the end of its window")
    p.add_argument("--processes", type=int, default=1, help="load processes per trial")
    p.add_argument("--sim-args", default="", help='flags for the simulated engine, e.g. "--max-num-seqs 8"')
    p.add_argument("--engine-kind", help="engine kind hint for telemetry (vllm, sglang, tgi, llamacpp)")
    p.add_argument("--reports", action="store_true", help="write report.md/html in every trial directory")
    p.add_argument("--quiet", action="store_true", help="no line per trial")
    p.set_defaults(func=run)


def _sigterm_as_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    from harness.capacity.search import TrialSettings, search_capacity
    from harness.errors import UserError
    from harness.results.lock import lock_dir
    from harness.scenario import load_scenario

    if not 0 < args.attainment <= 1:
        raise UserError(f"--attainment {args.attainment}: a share between 0 and 1, e.g. 0.95")
    # NaN passes every `<=` test and inf never ends a bisection: each number is checked as finite
    # (audit R9: --start nan|inf ended in an internal error, --precision nan ran every trial)
    if not 0 < args.precision < 1:
        raise UserError(f"--precision {args.precision}: a fraction between 0 and 1, e.g. 0.05")
    if args.max_trials < 1:
        raise UserError(f"--max-trials {args.max_trials}: at least 1")
    for flag, value in (("--start", args.start), ("--max-level", args.max_level), ("--duration", args.duration)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UserError(f"{flag} {value}: a finite number above 0")
    if args.warmup is not None and not (math.isfinite(args.warmup) and args.warmup >= 0):
        raise UserError(f"--warmup {args.warmup}: a finite number of seconds, 0 or more")
    scenario = load_scenario(
        args.scenario,
        {
            "target.url": args.target,
            "target.model": args.model,
            "load.duration_s": args.duration,
            "warmup.duration_s": args.warmup,
        },
    )
    out = args.out or Path("results") / "capacity" / f"{scenario.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    lock_dir(out, "--out", "search directory")  # one writer at a time (harness.results.lock)
    if any(out.iterdir()):  # its trials would append to an earlier search's trial directories
        raise UserError(f"--out {out}: not empty (an earlier search?); choose a new directory")
    settings = TrialSettings(
        model=scenario.target.model,
        engine_kind=args.engine_kind,
        scenario_path=args.scenario,
        processes=args.processes,
        early_stop=not args.no_early_stop,
        write_report=args.reports,
        print_trials=not args.quiet,
    )
    result = search_capacity(
        scenario,
        out,
        knob=args.knob,
        start=args.start,
        attainment=args.attainment,
        precision=args.precision,
        max_trials=args.max_trials,
        max_level=args.max_level,
        target_url=scenario.target.url,
        sim_args=shlex.split(args.sim_args),
        settings=settings,
    )
    print("\n".join(result.lines()))
    print(f"search: {out}/capacity.json (trial run directories beside it)")
    if not result.trials or all(t.status == "failed" for t in result.trials):
        print("error: no trial measured anything; see the trial directories' load.log", file=sys.stderr)
        return 1
    return 0
