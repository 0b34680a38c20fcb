"""`harness report DIR [--out DIR] [--format md,html]`: write report.md and report.html for a
run directory or a sweep directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import UserError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write report.md and a self-contained report.html for a run or sweep directory",
        description="Write report.md (figures in report_files/) and a self-contained report.html "
        "(figures embedded) for a run directory or a sweep directory.",
    )
    p.add_argument(
        "dir", type=Path, metavar="DIR", help="run directory (summary.json, ...) or sweep directory (index.json)"
    )
    p.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="where to write the report (default: DIR itself)"
    )
    p.add_argument("--format", default="md,html", metavar="LIST", help="comma-separated formats (default: md,html)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from harness.report import write_report
    from harness.report.writers import WRITERS

    formats = [f.strip() for f in str(args.format).split(",") if f.strip()]
    if not formats:
        raise UserError(f"--format: give at least one of {', '.join(WRITERS.names())}")
    for f in formats:
        WRITERS.get(f)  # unknown names fail here with the list of choices
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UserError(f"--out {args.out}: exists and is not a directory; pass a directory")
    path = write_report(args.dir, args.out, formats)
    out_dir = path.parent
    written = [out_dir / WRITERS.get(f).filename for f in formats]
    for w in written:
        print(f"wrote {w}")
    return 0
