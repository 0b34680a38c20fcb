"""--fail-on / scenario thresholds: parsing, units, evaluation against a summary."""

from __future__ import annotations

import pytest

from harness.errors import UserError
from harness.scenario import Scenario
from harness.scenario import thresholds as th

SUMMARY = {
    "requests": {"completed": 80, "failed": 20, "rps": 12.5},
    "tokens": {"output_per_s": 400.0},
    "goodput": {"overall": {"fraction": 0.9, "rps": 11.0}},
    "latency_ms": {"ttft": {"p50": 100.0, "p99": 700.0}, "itl_chunk": {"p99": 30.0}, "e2e": {"p90": None}},
}


@pytest.mark.parametrize("text, metric, op, value", [
    ("error_rate>1%", "error_rate", ">", 0.01), ("error_rate > 0.05", "error_rate", ">", 0.05),
    ("slo_attainment<95%", "slo_attainment", "<", 0.95), ("ttft_p99>500ms", "ttft_p99", ">", 500.0),
    ("TTFT_P99>0.5s", "ttft_p99", ">", 500.0), ("tpot_mean>=40", "tpot_mean", ">=", 40.0),
    ("output_tps<100", "output_tps", "<", 100.0),
])
def test_parse(text: str, metric: str, op: str, value: float) -> None:
    t = th.parse(text)
    assert (t.metric, t.op) == (metric, op) and t.value == pytest.approx(value)


@pytest.mark.parametrize("text, says", [
    ("error_rate", "expected METRIC<VALUE"), ("ttft_p95>1ms", "unknown metric"), ("error_rate>5ms", "a rate"),
    ("ttft_p99>5%", "a latency"), ("error_rate>150%", "between 0% and 100%"), ("rps<5ms", "per second"),
])
def test_parse_errors_name_the_problem(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        th.parse(text)


def test_evaluate_reports_only_failed_thresholds() -> None:
    ts = [th.parse(t) for t in ("error_rate>10%", "error_rate>50%", "slo_attainment<95%", "ttft_p99>500ms",
                                "ttft_p50>500ms", "itl_p99>20ms", "output_tps<100", "e2e_p90>1s")]
    lines = th.evaluate(ts, SUMMARY)
    assert lines == [
        "threshold error_rate>10% failed: error_rate = 20.00%",
        "threshold slo_attainment<95% failed: slo_attainment = 90.00%",
        "threshold ttft_p99>500ms failed: ttft_p99 = 700.0 ms",
        "threshold itl_p99>20ms failed: itl_p99 = 30.0 ms",
        "threshold e2e_p90>1s failed: the run has no e2e_p90 (no request completed, or no slo set)",
    ]


def test_invalid_fails_a_run_with_validity_warnings_and_prints_each() -> None:
    t = th.parse("invalid")
    assert t.metric == th.INVALID and th.parse(" INVALID ").metric == th.INVALID
    warned = {**SUMMARY, "validity": {"ok": False, "warnings": ["host stalled 3 time(s)", "client saturated: 95% CPU"]}}
    assert th.evaluate([t], warned) == ["threshold invalid failed: the run has 2 validity warning(s):",
                                        "  - host stalled 3 time(s)", "  - client saturated: 95% CPU"]
    assert th.evaluate([t], {**SUMMARY, "validity": {"ok": True, "warnings": []}}) == []
    assert Scenario.model_validate(_scenario(thresholds=["invalid", "error_rate>1%"])).thresholds[0] == "invalid"


def _scenario(**extra: object) -> dict:  # type: ignore[type-arg]
    return {"name": "t", "load": {"concurrency": 1, "requests": 1},
            "workload": {"classes": [{"name": "a", "input_tokens": 3, "output_tokens": 2}]}, **extra}


def test_scenario_file_thresholds_are_validated() -> None:
    assert Scenario.model_validate(_scenario(thresholds=["error_rate>1%"])).thresholds == ["error_rate>1%"]
    with pytest.raises(ValueError, match="unknown metric"):
        Scenario.model_validate(_scenario(thresholds=["latency>1"]))


def test_slo_attainment_needs_an_slo() -> None:
    import argparse

    from harness.cli.run_outcome import parse_thresholds

    args = argparse.Namespace(fail_on=["slo_attainment<95%"])
    with pytest.raises(UserError, match="sets no slo"):
        parse_thresholds(args, Scenario.model_validate(_scenario()))
    assert parse_thresholds(args, Scenario.model_validate(_scenario(slo={"ttft_ms": 100})))[0].metric == "slo_attainment"
