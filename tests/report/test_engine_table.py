"""The report's engine table: values read off bucketed histograms say what the buckets allow."""

from __future__ import annotations

import json

from harness.report.data import load_run
from harness.report.tables import engine_table
from harness.results.models import RunSummary

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
    _with_queue(
        run,
        {
            "p50": 150.0,
            "p99": 297.0,
            "mean": 13.04,
            "count": 500,
            "p50_bucket_ms": [0.0, 300.0],
            "p99_bucket_ms": [0.0, 300.0],
        },
    )
    row = _row(run, "Engine queue time")
    assert "150" not in row and "297" not in row
    assert row.startswith("< 300 (first bucket) / < 300 (first bucket) ms; mean 13.0 ms")


def test_a_quantile_above_the_first_bucket_keeps_its_interpolated_value(tmp_path):
    run = make_run(tmp_path / "r")
    _with_queue(
        run,
        {
            "p50": 450.0,
            "p99": 980.0,
            "mean": 470.0,
            "count": 500,
            "p50_bucket_ms": [300.0, 500.0],
            "p99_bucket_ms": [800.0, 1000.0],
        },
    )
    assert _row(run, "Engine queue time").startswith("450 / 980 ms; mean 470 ms")


def test_the_diagnosis_table_prints_a_first_bucket_quantile_as_the_engine_table_does(tmp_path):
    """GPU_VLLM defect 1 / D8 remnant: the diagnosis table printed vLLM's prefill time as
    '150.0 / 297.0' (interpolation inside the 0-300 ms bucket) while the engine table said
    '< 300 (first bucket)'. The interference analysis now writes no number for it (null and the
    bucket), and both tables print the same words."""
    from harness.diagnose.interference import _engine_side
    from harness.report.diagnosis import diagnosis_blocks
    from harness.telemetry.window import histogram_quantile

    # what telemetry writes for vLLM's prefill histogram when every prefill took < 300 ms
    counts = [(0.3, 40.0), (0.5, 40.0), (0.8, 40.0), (float("inf"), 40.0)]
    value, lo, hi = histogram_quantile(0.5, counts)
    assert (value, lo, hi) == (0.15, 0.0, 0.3)  # Prometheus' interpolation: half the bucket
    engine = {
        "engine_latency_ms": {
            "prefill": {
                "p50": None,
                "p99": None,
                "mean": 12.5,
                "count": 40,
                "p50_bucket_ms": [0.0, 300.0],
                "p99_bucket_ms": [0.0, 300.0],
            },
            "itl": {
                "p50": 31.0,
                "p99": 48.0,
                "mean": 32.0,
                "count": 900,
                "p50_bucket_ms": [25.0, 50.0],
                "p99_bucket_ms": [25.0, 50.0],
            },
        }
    }
    side = _engine_side(RunSummary.model_validate({"engine": engine}))
    assert side["prefill"]["p50_ms"] is None and side["prefill"]["p50_bucket_ms"] == [0.0, 300.0]

    run = make_run(tmp_path / "r")
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    summary["engine"]["engine_latency_ms"].update(engine["engine_latency_ms"])
    summary["diagnosis"] = {
        "interference": {
            "long_prompt_tokens": 1024,
            "long_prefills": 12,
            "gaps": 950,
            "spike_factor": 3.0,
            "verdict": "interference",
            "message": "m",
            "inside": {"count": 50, "p50_ms": 80.0, "p99_ms": 120.0},
            "outside": {"count": 900, "p50_ms": 24.0, "p99_ms": 30.0},
            "engine": side,
        }
    }
    path.write_text(json.dumps(summary))
    loaded = load_run(run)
    table = next(b for b in diagnosis_blocks(loaded) if getattr(b, "caption", "") and "Long prefill" in b.caption)
    prefill = next(r for r in table.rows if r[0] == "engine: prefill time per request")
    assert prefill[2:] == ["< 300 (first bucket)", "< 300 (first bucket)"]
    itl = next(r for r in table.rows if r[0] == "engine's own ITL histogram")
    assert itl[2:] == ["31.0", "48.0"]
    assert _row(run, "Engine prefill time per request").startswith("< 300 (first bucket) / < 300 (first bucket) ms")
    from harness.results.models.diagnosis import Diagnosis

    # the typed results model knows the bucket keys (extra="forbid": a sweep read such a summary as missing)
    typed = Diagnosis.model_validate(summary["diagnosis"])
    assert typed.interference.engine["prefill"].p50_bucket_ms == [0.0, 300.0]


def test_the_report_says_when_prompts_were_salted(tmp_path):
    """Audit N18: the console said 'prompts salted with workload.prompt_salt 764090437' (the
    target had no prefix-cache reset) and report.md said nothing of it."""
    from harness.report.tables import measurement_table

    run = make_run(tmp_path / "r")
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    summary["prefix_cache_isolation"] = {
        "mode": "salt",
        "reset_path": None,
        "prompt_salt": 764090437,
        "reason": "no prefix-cache reset (POST /reset_prefix_cache -> 404)",
    }
    path.write_text(json.dumps(summary))
    rows = dict(measurement_table(load_run(run)).rows)
    assert rows["Prefix cache before the run"] == (
        "prompts salted with workload.prompt_salt 764090437 (same lengths, other words): the target has "
        "no prefix-cache reset (POST /reset_prefix_cache -> 404)"
    )
    summary["prefix_cache_isolation"] = {
        "mode": "reset",
        "reset_path": "/reset_prefix_cache",
        "prompt_salt": None,
        "reason": None,
    }
    path.write_text(json.dumps(summary))
    assert (
        dict(measurement_table(load_run(run)).rows)["Prefix cache before the run"] == "reset (POST /reset_prefix_cache)"
    )
