"""`harness compare BASELINE CANDIDATE`: metric deltas with a verdict each; exit 1 on regression.

Exit codes: 0 no regression, 1 a regression beyond the threshold and the noise (or a sweep cell
that failed in the candidate only), 2 unusable input (missing directory, fingerprints differ
without --force, no completed requests).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import UserError

if TYPE_CHECKING:
    from harness.report.compare import Options


def parse_percent(text: str, flag: str) -> float:
    raw = str(text).strip().removesuffix("%").removesuffix("pp").strip()
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"{flag} {text!r}: give a number of percent, e.g. 5% or 2.5") from None
    if value < 0:
        raise UserError(f"{flag} {text!r}: must be >= 0")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="compare a candidate with a baseline; exit 1 on a regression beyond threshold and noise",
        description="Compare key metrics of CANDIDATE against BASELINE. Each side is a run directory, "
        "a folder of run directories (repeats), a comma-separated list of run directories, a sweep "
        "directory (compared cell by cell) or baseline:<name>. Exit 0: no regression; 1: regression; "
        "2: unusable input.",
    )
    p.add_argument("baseline", metavar="BASELINE")
    p.add_argument("candidate", metavar="CANDIDATE")
    p.add_argument(
        "--max-regression",
        default="5%",
        metavar="PCT",
        help="how much worse a metric may get before it counts (default 5%%)",
    )
    p.add_argument(
        "--max-error-increase",
        default="1",
        metavar="POINTS",
        help="allowed rise of the failed-request share, in percentage points (default 1)",
    )
    p.add_argument(
        "--metrics",
        action="append",
        metavar="LIST",
        help="comma-separated metrics to judge (default: ttft.p50,ttft.p99,itl.p50,itl.p99,tpot.p50,"
        "e2e.p50,e2e.p99,rps,output_tps,goodput_rps,error_rate)",
    )
    p.add_argument("--force", action="store_true", help="compare even when the workload fingerprints differ")
    p.add_argument(
        "--class",
        dest="classes",
        action="append",
        metavar="NAME",
        help="also judge this request class on its own (repeat or comma-separate; a regression of one class "
        "of a mixed workload can hide in the overall percentiles)",
    )
    p.add_argument("--per-class", action="store_true", help="judge every request class of the baseline on its own too")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--json-out", type=Path, default=None, metavar="FILE", help="also write the result as JSON to FILE")
    p.add_argument("--verbose", "-v", action="store_true", help="print the noise tests of every metric")
    p.add_argument("--confidence", type=float, default=0.95, help="bootstrap interval level (default 0.95)")
    p.add_argument("--bootstrap", type=int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling, for reproducible verdicts")
    p.add_argument(
        "--baselines",
        type=Path,
        default=None,
        metavar="DIR",
        help="where baseline:<name> is looked up (default results/baselines, or $HARNESS_BASELINES)",
    )
    p.set_defaults(func=_run)


def options_from(args: argparse.Namespace) -> Options:
    from harness.report.compare import Options

    if not 0.5 <= args.confidence < 1.0:
        raise UserError(f"--confidence {args.confidence}: give a level between 0.5 and 0.999, e.g. 0.95")
    if args.bootstrap < 100:
        raise UserError(f"--bootstrap {args.bootstrap}: use at least 100 resamples")
    return Options(
        threshold_pct=parse_percent(args.max_regression, "--max-regression"),
        max_error_pp=parse_percent(args.max_error_increase, "--max-error-increase"),
        confidence=args.confidence,
        bootstrap=args.bootstrap,
        seed=args.seed,
        force=args.force,
        classes=tuple(
            ["*"]
            if getattr(args, "per_class", False)
            else [c.strip() for spec in (getattr(args, "classes", None) or []) for c in spec.split(",") if c.strip()]
        ),
    )


def _run(args: argparse.Namespace) -> int:
    from harness.compare import metrics
    from harness.report.compare import compare, render_text

    opts = options_from(args)
    defs = metrics.resolve(args.metrics)
    result = compare(args.baseline, args.candidate, defs, opts, args.baselines)
    from harness.quality.compare import judge_comparison

    judge_comparison(result)  # the quality verdict beside the latency one (exit 1 on a failed gate)
    if args.json_out is not None:
        try:
            args.json_out.write_text(json.dumps(result.to_json(), indent=2) + "\n")
        except OSError as exc:
            raise UserError(f"--json-out {args.json_out}: cannot write ({exc.strerror})") from None
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(result, verbose=args.verbose))
    return result.exit_code
