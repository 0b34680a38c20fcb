"""`harness gh-summary DIR [--compare-to BASELINE]`: a Markdown summary of a run or sweep for a CI
job page. Appends to the file named by $GITHUB_STEP_SUMMARY when it is set (as GitHub Actions
does), else prints to stdout. Exits 0 even when the comparison finds a regression: gating is
`harness compare`'s job; 2 when DIR is unusable."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.errors import UserError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gh-summary",
        help="Markdown summary of a run or sweep (and a baseline comparison) for $GITHUB_STEP_SUMMARY",
        description="Write a Markdown summary of a run or sweep directory, optionally with its comparison "
        "against a baseline. Appends to $GITHUB_STEP_SUMMARY when set, else prints it.",
    )
    p.add_argument("dir", type=Path, metavar="DIR", help="run directory or sweep directory")
    p.add_argument(
        "--compare-to",
        default=None,
        metavar="BASELINE",
        help="baseline:<name> or a run/sweep directory to compare with",
    )
    p.add_argument("--max-regression", default="5%", metavar="PCT", help="as for `harness compare` (default 5%%)")
    p.add_argument("--max-error-increase", default="1", metavar="POINTS", help="as for `harness compare` (default 1)")
    p.add_argument("--metrics", action="append", metavar="LIST", help="as for `harness compare`")
    p.add_argument("--force", action="store_true", help="compare even when fingerprints differ")
    p.add_argument("--class", dest="classes", action="append", metavar="NAME", help="as for `harness compare`")
    p.add_argument("--per-class", action="store_true", help="as for `harness compare`")
    p.add_argument("--title", default=None, help="heading of the summary")
    p.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="FILE",
        help="append to FILE instead of $GITHUB_STEP_SUMMARY / stdout",
    )
    p.add_argument("--baselines", type=Path, default=None, metavar="DIR", help="where baseline:<name> is looked up")
    p.set_defaults(func=_run, confidence=0.95, bootstrap=2000, seed=0)


def _run(args: argparse.Namespace) -> int:
    from harness.cli.compare import options_from
    from harness.compare import metrics
    from harness.report.summary_md import build_summary

    opts = options_from(args)
    defs = metrics.resolve(args.metrics)
    text, _ = build_summary(args.dir, args.compare_to, opts, defs, args.title, args.baselines)
    target = args.output or (Path(os.environ["GITHUB_STEP_SUMMARY"]) if os.environ.get("GITHUB_STEP_SUMMARY") else None)
    if target is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        raise UserError(
            f"cannot append the summary to {target} ({exc.strerror}); check $GITHUB_STEP_SUMMARY / --output"
        ) from None
    print(f"appended the summary to {target}")
    return 0
