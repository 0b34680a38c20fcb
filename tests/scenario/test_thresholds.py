"""--fail-on / scenario thresholds: parsing and units (judging a run: tests/results/test_thresholds.py)."""

from __future__ import annotations

import pytest

from harness.errors import UserError
from harness.scenario import Scenario
from harness.scenario import thresholds as th


@pytest.mark.parametrize(
    "text, metric, op, value",
    [
        ("error_rate>1%", "error_rate", ">", 0.01),
        ("error_rate > 0.05", "error_rate", ">", 0.05),
        ("slo_attainment<95%", "slo_attainment", "<", 0.95),
        ("ttft_p99>500ms", "ttft_p99", ">", 500.0),
        ("TTFT_P99>0.5s", "ttft_p99", ">", 500.0),
        ("tpot_mean>=40", "tpot_mean", ">=", 40.0),
        ("output_tps<100", "output_tps", "<", 100.0),
    ],
)
def test_parse(text: str, metric: str, op: str, value: float) -> None:
    t = th.parse(text)
    assert (t.metric, t.op) == (metric, op) and t.value == pytest.approx(value)


@pytest.mark.parametrize(
    "text, says",
    [
        ("error_rate", "expected METRIC<VALUE"),
        ("ttft_p95>1ms", "unknown metric"),
        ("error_rate>5ms", "a rate"),
        ("ttft_p99>5%", "a latency"),
        ("error_rate>150%", "between 0% and 100%"),
        ("rps<5ms", "per second"),
    ],
)
def test_parse_errors_name_the_problem(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        th.parse(text)


def _scenario(**extra: object) -> dict:
    return {
        "name": "t",
        "load": {"concurrency": 1, "requests": 1},
        "workload": {"classes": [{"name": "a", "input_tokens": 3, "output_tokens": 2}]},
        **extra,
    }


def test_invalid_is_a_threshold() -> None:
    assert th.parse("invalid").metric == th.INVALID and th.parse(" INVALID ").metric == th.INVALID
    assert Scenario.model_validate(_scenario(thresholds=["invalid", "error_rate>1%"])).thresholds[0] == "invalid"


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
    assert (
        parse_thresholds(args, Scenario.model_validate(_scenario(slo={"ttft_ms": 100})))[0].metric == "slo_attainment"
    )
