"""Timeslices and the steady-state check: a queue that keeps building is flagged as drift; a
steady series is not."""

from __future__ import annotations

import json

from harness.diagnose.timeslices import steady_state
from tests.diagnose.conftest import run_harness


def _slices(values, key="waiting_mean"):
    return [{key: v, "duration_s": 10.0} for v in values]


def test_steady_state_units():
    assert steady_state(_slices([0.0, 0.0, 0.0, 0.0]))["drift"] is False
    noisy = steady_state(_slices([5.0, 9.0, 4.0, 8.0, 5.5], key="output_tps"))
    assert noisy["checked"] and not noisy["drift"], noisy
    grown = steady_state(_slices([1.0, 10.0, 20.0, 30.0, 40.0]))
    assert (
        grown["drift"]
        and grown["drifted"][0]["metric"] == "waiting_mean"
        and "queue still building" in grown["message"]
    )
    assert steady_state(_slices([1.0, 2.0]))["checked"] is False


OVERLOAD = """
name: overload
seed: 3
load: {rate: 12, duration_s: 6}
sampling: {ignore_eos: true}
workload:
  classes:
    - {name: c, input_tokens: {dist: fixed, value: 64}, output_tokens: {dist: fixed, value: 32}}
"""


def test_a_queue_building_window_is_flagged(tmp_path):
    # 2 sequences at a time serve ~6 requests/s; 12/s arrive: the queue grows all window long
    s = run_harness(
        tmp_path / "run", OVERLOAD, "--max-num-seqs 2 --max-num-batched-tokens 2048", "--slice-s", "1.5", "--no-report"
    )
    ts = s["diagnosis"]["timeslices"]
    assert ts["slice_s"] == 1.5 and ts["count"] >= 4
    assert ts["steady_state"]["drift"], ts
    assert any(w.startswith("not in steady state") for w in s["validity"]["warnings"])
    assert any(f["id"] == "drift" for f in s["findings"])
    slices = [x for x in json.loads((tmp_path / "run" / "timeslices.json").read_text())["slices"] if not x["drain"]]
    assert slices[-1]["ttft_p50_ms"] > 2 * slices[0]["ttft_p50_ms"], slices
    for key in ("output_tps", "itl_p99_ms", "kv_usage_mean", "waiting_mean", "in_flight_mean"):
        assert key in slices[0]
