"""Prefill/decode interference on the simulator: long prompts stall decoding without chunked
prefill; a 512-token budget shrinks the inside/outside ITL gap (guide 001, 1.1)."""

from __future__ import annotations

import numpy as np
import pytest
from simlag import blame_sim_lag

from harness.diagnose.interference import long_threshold, overlaps
from tests.diagnose.conftest import finish, start_harness

SCENARIO = """
name: interference
seed: 1
load: {concurrency: 10, duration_s: 6}
warmup: {requests: 4}
sampling: {ignore_eos: true}
workload:
  classes:
    - {name: chat, weight: 8, input_tokens: {dist: fixed, value: 64}, output_tokens: {dist: fixed, value: 120}}
    - {name: doc, weight: 2, input_tokens: {dist: fixed, value: 12000}, output_tokens: {dist: fixed, value: 4}}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("interference")
    procs = {
        "off": start_harness(
            root / "off", SCENARIO, "--no-enable-chunked-prefill --max-model-len 16384", "--slice-s", "2"
        ),
        "on": start_harness(
            root / "on", SCENARIO, "--max-num-batched-tokens 512 --max-model-len 16384", "--slice-s", "2", "--no-report"
        ),  # only the "off" run's report is read
    }
    return {**{k: finish(p, root / k) for k, p in procs.items()}, "root": root}


def test_chunked_prefill_shrinks_the_inside_outside_gap(runs):
    with blame_sim_lag(runs["root"]):  # the gaps are the simulator's step times
        _gaps(runs)


def _gaps(runs) -> None:
    off, on = runs["off"]["diagnosis"]["interference"], runs["on"]["diagnosis"]["interference"]
    for b in (off, on):
        assert b["long_prefills"] >= 3 and b["inside"]["count"] >= 20, b
    # without chunking a 12k-token prefill is one long step: every decode gap during it is that long
    assert off["p99_ratio"] > 3 and off["verdict"] == "interference", off
    assert off["inside"]["p99_ms"] > 2 * on["inside"]["p99_ms"], (off, on)
    assert off["p99_ratio"] > 1.5 * on["p99_ratio"], (off, on)
    assert off["spike_share_inside"] > off["inside_share_of_gaps"], off  # spikes cluster in prefills beyond chance
    # the engine's own figures beside: its ITL histogram and per-request prefill/decode times
    assert off["engine"]["itl"]["p99_ms"] > 0 and off["engine"]["prefill"]["p50_ms"] > 0, off["engine"]


def test_findings_in_summary_and_report_first_screen(runs):
    summary = runs["off"]
    first = summary["findings"][0]
    with blame_sim_lag(runs["root"]):  # interference ranks first when the step times are the model's
        assert first["id"] == "interference" and "chunked prefill" in first["advice"] and first["knobs"], first
    md = (runs["root"] / "off" / "report.md").read_text()
    head = md.split("## Record list")[0]  # the first screen: before the tables
    assert "Findings" in head and "ITL p99" in head and "--max-num-batched-tokens 512" in head, head
    assert (runs["root"] / "off" / "report_files" / "interference.png").stat().st_size > 5000
    assert (runs["root"] / "off" / "report_files" / "timeslices.png").stat().st_size > 5000


def test_overlap_and_threshold_units():
    starts, ends = np.array([1.0, 5.0]), np.array([2.0, 6.0])
    a, b = np.array([0.5, 1.5, 2.0, 4.0, 5.5, 6.5]), np.array([0.9, 1.7, 3.0, 5.1, 5.7, 7.0])
    assert overlaps(a, b, starts, ends).tolist() == [False, True, False, True, True, False]
    assert long_threshold(np.array([64, 64, 80]), None) == 1024
    assert long_threshold(np.array([2000, 3000, 4000]), None) == 12000
    assert long_threshold(np.array([1.0]), 500) == 500
