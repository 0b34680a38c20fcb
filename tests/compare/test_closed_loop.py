"""The per-request (Little's law) goodput test decides only where the compare's time slices are
shorter than a request, and only beyond noise: a real 18% difference in E2E at 128 users is
decided, the same distribution twice is not, and open loops or long slices are left to the
compare."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.compare.closed_loop import per_request_goodput
from harness.report.data import RunData
from harness.results.schema import RunSummary

SCENARIO = {"load": {"concurrency": 128}, "slo": {"tpot_ms": 60}, "workload": {"classes": [{"name": "chat"}]}}


def run(e2e_s: np.ndarray, window_s: float = 8.8, load: dict | None = None, tpot_ms: float = 20.0) -> RunData:
    reqs = [
        {
            "class": "chat",
            "warmup": False,
            "error": None,
            "e2e_ms": float(v) * 1000.0,
            "ttft_ms": 50.0,
            "tpot_ms": tpot_ms,
        }
        for v in e2e_s
    ]
    scenario = {**SCENARIO, "load": load or SCENARIO["load"]}
    return RunData(
        path=Path("."),
        summary=RunSummary.model_validate({"window": {"duration_s": window_s}}),
        requests=reqs,
        scenario=scenario,
    )


def e2e(mean: float, n: int = 400, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.8 * mean, 1.2 * mean, n)


def test_a_real_difference_is_decided_and_the_same_traffic_is_not():
    slow, fast = run(e2e(3.0)), run(e2e(3.0 / 1.18, seed=2))
    r = per_request_goodput([slow], [fast])
    assert r is not None
    assert 14 < r["change_pct"] < 22 and r["interval"][0] > 5, r
    assert "Little's law" in r["test"] and "128 users" in r["test"]
    same = per_request_goodput([run(e2e(3.0, seed=3))], [run(e2e(3.0, seed=4))])
    assert same is not None and same["interval"][0] < 0 < same["interval"][1], same


def test_requests_outside_the_slo_count_as_zero_goodput():
    good, bad = run(e2e(3.0)), run(e2e(3.0, seed=2), tpot_ms=90.0)  # TPOT above the 60-ms SLO
    r = per_request_goodput([good], [bad])
    assert r is not None and r["candidate"] == 0.0 and r["interval"][1] < 0


def test_open_loop_and_long_slices_are_left_to_the_compare():
    rate = {"rate": 40.0}
    assert per_request_goodput([run(e2e(3.0), load=rate)], [run(e2e(2.5), load=rate)]) is None
    # 0.3-s requests in 0.9-s slices: the slices see the rate, the compare's interval holds
    assert per_request_goodput([run(e2e(0.3))], [run(e2e(0.25))]) is None
