"""Did a run succeed? The one place that decides `harness run`'s exit status from its summary.

Why: a run whose engine died, that stopped early, or where most requests failed used to exit 0
with `status: complete`. Exit 1 says the run itself failed (its results are still written);
exit 99 (harness.scenario.thresholds) says it ran but missed a threshold the user set.
"""

from __future__ import annotations

from harness.results.schema import RunSummary

RUN_FAILED_EXIT = 1
#: a run where at least this share of measured requests failed is a failed run
MOST_FAILED_FRACTION = 0.5


def kinds(summary: RunSummary) -> str:
    by_kind = summary.requests.errors_by_kind
    return ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])) or "none sent"


def nothing_completed(summary: RunSummary) -> str:
    """Why a run with no completed request measured nothing, and what to change. Every request
    cut at the drain deadline means the engine was too slow for the load, not that it broke
    (audit N12: the sweep's max-num-seqs=8 row said only `failed:`)."""
    reason = f"no request completed in the measured window ({kinds(summary)})"
    by_kind = summary.requests.errors_by_kind
    if by_kind and set(by_kind) == {"cut"}:
        drain = summary.window.drain_s
        after = f" {drain:.0f} s" if drain else ""
        reason += (
            f": every measured request was still in flight{after} after the window ended, so the engine "
            "serves this load too slowly to finish one; give it less load (load.concurrency or load.rate) "
            "or a longer window (load.duration_s; the drain after it grows with it)"
        )
    return reason


def most_failed(summary: RunSummary) -> str | None:
    """'N% of measured requests failed (...)' when most did; None otherwise."""
    done, failed = summary.requests.completed, summary.requests.failed
    if done and failed / (done + failed) >= MOST_FAILED_FRACTION:
        return f"{100 * failed / (done + failed):.0f}% of measured requests failed ({kinds(summary)})"
    return None


def failure_reason(summary: RunSummary) -> str | None:
    """Why the run failed, in one line; None for a run that measured what it was asked to."""
    if summary.status == "failed" and summary.status_reason:
        return summary.status_reason
    lost = summary.client.lost_workers
    if lost:  # what they reported is in the summary; what they had in flight is not
        return f"{len(lost)} of {summary.client.processes} workers lost mid-run ({summary.status_reason})"
    if summary.requests.completed == 0:
        return nothing_completed(summary)
    return most_failed(summary)
