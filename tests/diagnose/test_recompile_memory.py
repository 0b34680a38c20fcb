"""Batch sizes outside the CUDA-graph capture sizes on the simulator: the run counts the
recompilation warnings its log shows during the window, and the simulated device memory grows
by the graph pool (guide 001, 2.2), reported with the margin left."""

from __future__ import annotations

from tests.diagnose.conftest import run_harness

SCENARIO = """
name: uncaptured
seed: 5
load: {concurrency: 24, duration_s: 5}
warmup: {requests: 2}
sampling: {ignore_eos: true}
workload:
  classes:
    - {name: c, input_tokens: {dist: fixed, value: 32}, output_tokens: {dist: uniform, min: 10, max: 80}}
"""


def test_uncaptured_batch_sizes_recompile_and_grow_memory(tmp_path):
    s = run_harness(
        tmp_path / "run",
        SCENARIO,
        "--cuda-graph-sizes 1 2 4 8 --max-num-seqs 32 --sim-graph-mib-per-shape 200 --sim-speed 4",
        "--no-report",
    )  # the findings are summary.json's; a report costs ~1.3 CPU-s
    log = s["diagnosis"]["engine_log"]
    rec = log["events"]["recompilation"]
    # decode batches of 9..24 sequences have no graph: each new size is compiled once, in the window
    assert log["scope"] == "measured window" and 3 <= rec["count"] <= 24, log
    assert "is not in the CUDA graph capture sizes" in rec["first"]
    assert any(w.startswith(f"{rec['count']} recompilations during the window") for w in s["validity"]["warnings"])
    mem = s["diagnosis"]["memory"]
    assert mem["source"] == "simulated" and mem["grew"] and mem["growth_gib"] >= 0.39, mem
    assert mem["margin_gib"] is not None and mem["margin_gib"] < 80 - mem["start_gib"]
    ids = [f["id"] for f in s["findings"]]
    assert "recompilation" in ids and "memory_growth" in ids, ids
    grown = next(f for f in s["findings"] if f["id"] == "memory_growth")
    assert "memory grew by" in grown["text"] and "(graph pool or fragmentation)" in grown["text"]


def test_default_capture_sizes_cover_every_decode_batch(tmp_path):
    s = run_harness(tmp_path / "run", SCENARIO, "--max-num-seqs 32 --sim-speed 4", "--no-report")
    log = s["diagnosis"]["engine_log"]
    assert "recompilation" not in log["events"], log
    assert not s["diagnosis"]["memory"]["grew"]
