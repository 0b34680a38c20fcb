"""The report's engine table: values read off bucketed histograms say what the buckets allow."""

from __future__ import annotations

import json

from harness.report.data import load_run
from harness.report.tables import engine_table

from .fabricate import make_run


def _with_queue(run_dir, queue: dict) -> None:
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary["engine"]["engine_latency_ms"] = {"queue": queue}
    path.write_text(json.dumps(summary))


def _row(run_dir, label: str) -> str:
    table = engine_table(load_run(run_dir))
    return next(r[1] for r in table.rows if r[0].startswith(label))


def test_a_quantile_inside_the_first_bucket_is_not_shown_as_a_measurement(tmp_path):
    """Audit D8: vLLM's first queue-time bucket is 0-300 ms, so every short queue interpolated to
    '150 ms' while the mean was 13 ms. The table shows the bound and the mean."""
    run = make_run(tmp_path / "r")
    _with_queue(run, {"p50": 150.0, "p99": 297.0, "mean": 13.04, "count": 500,
                      "p50_bucket_ms": [0.0, 300.0], "p99_bucket_ms": [0.0, 300.0]})
    row = _row(run, "Engine queue time")
    assert "150" not in row and "297" not in row
    assert row.startswith("< 300 (first bucket) / < 300 (first bucket) ms; mean 13.0 ms")


def test_a_quantile_above_the_first_bucket_keeps_its_interpolated_value(tmp_path):
    run = make_run(tmp_path / "r")
    _with_queue(run, {"p50": 450.0, "p99": 980.0, "mean": 470.0, "count": 500,
                      "p50_bucket_ms": [300.0, 500.0], "p99_bucket_ms": [800.0, 1000.0]})
    assert _row(run, "Engine queue time").startswith("450 / 980 ms; mean 470 ms")
