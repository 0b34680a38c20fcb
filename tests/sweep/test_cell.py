"""harness.sweep.cell.cell_entry: a failed or partial cell always carries a reason (audit N12:
a run that ended `failed` without raising left the sweep row `failed:` and nothing after it).
The sim-backed case is tests/sweep/test_failure_reason_sim.py; here the fallbacks it cannot
reach cheaply, on real summaries and the real plan."""

import pytest

from harness.results.models.summary import RequestsBlock, RunSummary, Validity
from harness.sweep.cell import cell_entry
from harness.sweep.plan import build_plan


@pytest.fixture
def cell(write_sweep):
    path = write_sweep({"name": "c", "engine": {"kind": "sim"}, "vary": {"flags": {"max-num-seqs": [4]}}})
    return build_plan(path).cells[0]


def entry(cell, status="failed", reason=None, summary=None, extra=None):
    return cell_entry(cell, status, reason, None, None, extra, summary)


def test_the_executors_reason_is_kept(cell):
    assert entry(cell, reason="engine exited with code 1 during the run").reason == (
        "engine exited with code 1 during the run"
    )


def test_a_failed_run_gives_its_status_reason(cell):
    summary = RunSummary(status="failed", status_reason="the target stopped accepting connections")
    assert entry(cell, summary=summary).reason == "the target stopped accepting connections"


def test_no_status_reason_gives_the_verdict_harness_run_exits_on(cell):
    summary = RunSummary(status="failed", requests=RequestsBlock(completed=0, failed=3, errors_by_kind={"http": 3}))
    assert entry(cell, summary=summary).reason == "no request completed in the measured window (http 3)"


def test_a_partial_run_stopped_early_says_so(cell):
    summary = RunSummary(
        status="partial",
        requests=RequestsBlock(completed=5),
        load={"stopped_early": "TTFT p99 above 10 s"},
        validity=Validity(ok=False, warnings=["host stalled 1 time(s)"]),
    )
    assert entry(cell, status="partial", summary=summary).reason == "stopped early: TTFT p99 above 10 s"


def test_without_a_summary_the_engine_logs_last_line(cell):
    got = entry(cell, extra={"log_tail": ["INFO started", "CUDA error: out of memory", "  "]})
    assert got.reason == "the run ended failed without saying why; the engine log ends: CUDA error: out of memory"


def test_with_nothing_to_go_on_it_says_where_to_look(cell):
    got = entry(cell, extra={"log": "logs/max-num-seqs=4.log"})
    assert got.reason == (
        f"the run ended failed without saying why and wrote no summary.json; see {cell.run_dir}/ "
        "and logs/max-num-seqs=4.log"
    )


def test_a_complete_cell_has_no_reason(cell):
    summary = RunSummary(status="complete", requests=RequestsBlock(completed=5))
    assert entry(cell, status="complete", summary=summary).reason is None
