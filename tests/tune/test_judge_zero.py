"""A current best with no request within the SLOs: the compare's relative change has no base, so
the judge tests the share of good requests instead (seen on the H200: eager `transformers serve`
met the chat SLOs for 0 of 23 requests, CUDA graphs for 65 of 65, and the step called it a tie)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.tune.judge import fisher_greater, from_zero
from harness.results.models.sweep import Cell
from harness.tune.measure import Measurement


def meas(completed: int, fraction: float) -> Measurement:
    entry = Cell.model_validate({"config_id": "c", "scenario": "chat", "status": "complete", "load_level": "concurrency=32", "id": "c", "run_dir": "runs/c",
             "metrics": {"completed": completed, "goodput_fraction": fraction}})
    return Measurement({}, "c", Path("."), [entry], "concurrency=32")


def test_fisher_exact_one_sided_matches_hand_computed_values():
    assert fisher_greater(0, 10, 1, 10) == pytest.approx(0.5)  # 1 good of 20: on either side with equal odds
    assert fisher_greater(0, 20, 3, 20) == pytest.approx(6840 / 59280)  # C(20,3)/C(40,3)
    assert fisher_greater(0, 23, 65, 65) < 1e-20


def test_zero_baseline_is_beaten_only_beyond_noise():
    assert from_zero(meas(23, 0.0), meas(65, 1.0), "chat", 0.05)["verdict"] == "better"
    small = from_zero(meas(10, 0.0), meas(10, 0.1), "chat", 0.05)
    assert small["verdict"] == "tie" and "Fisher" in small["test"]
    assert from_zero(meas(23, 0.5), meas(65, 1.0), "chat", 0.05) is None  # the compare decides
    assert from_zero(meas(23, 0.0), meas(65, 0.0), "chat", 0.05) is None  # nothing good on either side
