"""The baseline step says when the measure window is short for the traffic (requests longer than
half the window, or under 30 completions), since goodput decisions then end as ties."""

from __future__ import annotations

from pathlib import Path

from harness.results.models.sweep import Cell
from harness.tune.measure import Measurement
from harness.tune.steps.baseline import short_window


def meas(e2e_p50_ms: float, completed: int) -> Measurement:
    entry = Cell.model_validate(
        {
            "config_id": "c",
            "scenario": "chat",
            "status": "complete",
            "load_level": "concurrency=32",
            "id": "c",
            "run_dir": "runs/c",
            "metrics": {"e2e_p50_ms": e2e_p50_ms, "completed": completed},
        }
    )
    return Measurement({}, "c", Path("."), [entry], "concurrency=32")


def test_long_requests_or_few_completions_are_noted():
    assert "median request 20.9 s in a 12-s window" in short_window(meas(20900, 23), 12)
    assert "12 requests completed" in short_window(meas(2000, 12), 60)
    assert short_window(meas(2000, 400), 60) == ""
