"""Thresholds judged on a run's typed summary (harness/results/thresholds.py)."""

from __future__ import annotations

from harness.results.models import RunSummary
from harness.results.thresholds import evaluate
from harness.scenario import thresholds as th

SUMMARY = {
    "requests": {"completed": 80, "failed": 20, "rps": 12.5},
    "tokens": {"output_per_s": 400.0},
    "goodput": {"overall": {"fraction": 0.9, "rps": 11.0}},
    "latency_ms": {"ttft": {"p50": 100.0, "p99": 700.0}, "itl_chunk": {"p99": 30.0}, "e2e": {"p90": None}},
}


def test_evaluate_reports_only_failed_thresholds() -> None:
    ts = [
        th.parse(t)
        for t in (
            "error_rate>10%",
            "error_rate>50%",
            "slo_attainment<95%",
            "ttft_p99>500ms",
            "ttft_p50>500ms",
            "itl_p99>20ms",
            "output_tps<100",
            "e2e_p90>1s",
        )
    ]
    lines = evaluate(ts, RunSummary.model_validate(SUMMARY))
    assert lines == [
        "threshold error_rate>10% failed: error_rate = 20.00%",
        "threshold slo_attainment<95% failed: slo_attainment = 90.00%",
        "threshold ttft_p99>500ms failed: ttft_p99 = 700.0 ms",
        "threshold itl_p99>20ms failed: itl_p99 = 30.0 ms",
        "threshold e2e_p90>1s failed: the run has no e2e_p90 (no request completed, or no slo set)",
    ]


def test_invalid_fails_a_run_with_validity_warnings_and_prints_each() -> None:
    t = th.parse("invalid")
    warned = {**SUMMARY, "validity": {"ok": False, "warnings": ["host stalled 3 time(s)", "client saturated: 95% CPU"]}}
    assert evaluate([t], RunSummary.model_validate(warned)) == [
        "threshold invalid failed: the run has 2 validity warning(s):",
        "  - host stalled 3 time(s)",
        "  - client saturated: 95% CPU",
    ]
    assert evaluate([t], RunSummary.model_validate({**SUMMARY, "validity": {"ok": True, "warnings": []}})) == []
