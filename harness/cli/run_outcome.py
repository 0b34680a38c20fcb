"""`harness run`'s guard on --out and its verdict: exit status, thresholds (`--fail-on`).

Why: reusing --out appended a second run to the first's jsonl files (refused now, as `sweep`
does, unless --force clears the run files); two runs started at once on one --out both passed
that check (the directory is locked now: harness.results.lock); a run that failed before it
measured anything (a wrong --model, a target that is down) left scenario.yaml behind, and the
corrected command was then refused as "not empty" (such a directory is reused now); and a run
whose engine died or where most requests failed exited 0. Exit 1: the run failed (results kept, status in summary.json); exit 99
(k6's code): a threshold from --fail-on or the scenario's `thresholds:` failed.
"""

from __future__ import annotations

import argparse
import fnmatch
import shutil
import sys
from pathlib import Path

from harness.errors import UserError
from harness.results.lock import lock_dir
from harness.results.schema import RunSummary
from harness.results.thresholds import evaluate as evaluate_thresholds
from harness.results.verdict import RUN_FAILED_EXIT, failure_reason
from harness.scenario import thresholds as th
from harness.scenario.models import Scenario

#: what a run writes into its directory (--force removes these, nothing else)
RUN_FILES = (
    "scenario.yaml",
    "summary.json",
    "histograms.json",
    "requests*.jsonl",
    "progress*.jsonl",
    "engine_metrics.jsonl",
    "load_plan*.json",
    "load_result*.json",
    "load.log",
    "sim.log",
    "sim.r*.log",
    "timeslices.json",
    "interference.json",
    "report.md",
    "report.html",
    "*.tmp",
)
RUN_DIRS = ("report_files",)


def add_outcome_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="COND",
        help='fail the run (exit 99) when COND holds, e.g. "error_rate>1%%", "slo_attainment<95%%", '
        '"ttft_p99>500ms", or "invalid" (the run has validity warnings: each is printed); '
        "repeatable; adds to the scenario's thresholds:",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="reuse a non-empty --out: delete the earlier run's files first (default: refuse)",
    )


def parse_thresholds(args: argparse.Namespace, scenario: Scenario) -> list[th.Threshold]:
    out = []
    for text in [*scenario.thresholds, *args.fail_on]:
        try:
            out.append(th.parse(text))
        except ValueError as exc:
            raise UserError(f"--fail-on {exc}") from None
    if any(t.metric == "slo_attainment" for t in out) and not scenario.has_slo():
        raise UserError("threshold slo_attainment: the scenario sets no slo; add slo: {ttft_ms: ..., tpot_ms: ...}")
    return out


def prepare_out(out: Path, force: bool) -> None:
    """Lock --out for this run and refuse it when it holds an earlier run (a second run would be
    appended to the first's); what an attempt that measured nothing left is cleared instead."""
    lock_dir(out)
    entries = list(out.iterdir())
    if not entries:
        return
    if not force and not measured_nothing(entries):
        raise UserError(
            f"--out {out}: not empty (an earlier run?); choose a new directory, "
            "or add --force to delete its run files first"
        )
    for pattern in RUN_FILES:
        for path in out.glob(pattern):
            if path.is_file():
                path.unlink()
    for name in RUN_DIRS:
        if (out / name).is_dir():
            shutil.rmtree(out / name)


def measured_nothing(entries: list[Path]) -> bool:
    """Whether a directory's entries are only what a run that stopped before measuring leaves
    (scenario.yaml, logs, a plan, empty request files): nothing there is worth keeping from a retry."""
    for path in entries:
        if not path.is_file() or not any(fnmatch.fnmatch(path.name, pat) for pat in RUN_FILES):
            return False
        if path.name in ("summary.json", "histograms.json") or path.name.startswith("load_result"):
            return False
        if path.name.startswith("requests") and path.stat().st_size > 0:
            return False
    return True


def outcome(summary: RunSummary, out: Path, wanted: list[th.Threshold]) -> int:
    """Print why a run failed (or which thresholds it missed) and return the exit status."""
    reason = failure_reason(summary)
    if reason is not None:
        print(f"error: {reason}; results kept in {out} (see requests.jsonl and load.log)", file=sys.stderr)
        return RUN_FAILED_EXIT
    missed = evaluate_thresholds(wanted, summary)
    for line in missed:
        print(f"error: {line}", file=sys.stderr)
    return th.THRESHOLD_EXIT if missed else 0
