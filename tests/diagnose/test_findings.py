"""Findings rules: each says its number and the guide's advice; ranked most severe first."""

from __future__ import annotations

from typing import Any

from harness.diagnose.findings import findings as typed_findings
from harness.diagnose.findings import headline
from harness.results.models import RunSummary
from harness.results.models.diagnosis import Diagnosis, Finding


def findings(summary: dict[str, Any], diag: dict[str, Any]) -> list[Finding]:
    """The rules on a summary and diagnosis given as summary.json would hold them."""
    return typed_findings(RunSummary.model_validate(summary), Diagnosis.model_validate(diag))


def test_kv_pressure_says_the_guides_order():
    summary = {"engine": {"kv_usage": {"max": 0.99}, "preemptions": {"count": 31}}}
    f = findings(summary, {})[0]
    assert f.id == "kv_pressure" and f.text == "KV usage max 0.99 with 31 preemptions"
    assert f.advice.startswith("lower --max-num-seqs first, then --max-model-len")
    assert headline(f).startswith("KV usage max 0.99 with 31 preemptions: lower --max-num-seqs first")
    assert f.knobs[0] == "max_num_seqs"


def test_ranking_and_quiet_runs():
    diag = {
        "engine_log": {
            "path": "e.log",
            "patterns": "vllm",
            "events": {"recompilation": {"count": 14, "first": "Recompiling ...", "means": "m"}},
        },
        "timeslices": {
            "slice_s": 10.0,
            "count": 6,
            "file": "timeslices.json",
            "steady_state": {"checked": True, "drift": True, "message": "not in steady state: ...", "drifted": []},
        },
        "memory": {
            "grew": True,
            "growth_gib": 2.1,
            "margin_gib": 0.4,
            "peak_gib": 79.6,
            "low_margin": True,
            "source": "nvml",
            "samples": 20,
        },
    }
    ids = [f.id for f in findings({"engine": {}}, diag)]
    assert ids == ["recompilation", "memory_growth", "drift"], ids
    assert findings({"engine": {"kv_usage": {"max": 0.3}, "preemptions": {"count": 0}}}, {}) == []


def test_kv_pressure_names_the_flag_that_sets_the_cache():
    """With --kv-cache-memory-bytes the fraction does not size the KV cache: the advice names the
    flag in effect (GPU_VLLM.md: 64 users, 283 preemptions, 136 GiB free on the card)."""
    summary = {
        "engine": {"kv_usage": {"max": 0.997}, "preemptions": {"count": 283}, "kv_cache_memory_bytes": 1073741824}
    }
    f = findings(summary, {})[0]
    assert "raise --kv-cache-memory-bytes (now 1.00 GiB; it overrides --gpu-memory-utilization)" in f.advice
    assert "raise --gpu-memory-utilization" not in f.advice and "kv_cache_memory_bytes" in f.knobs
