"""The over-saturation test on synthetic progress lines and TTFTs (the end-to-end run is in
tests/capacity/test_capacity_sim.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from harness.capacity.saturation import SaturationDetector, fit_slope


def lines(t: float, done: int, phase: str = "measure", sent: int = 10**6) -> list[dict]:
    """A load process's progress line: open loop hands out `sent` requests ahead of time."""
    return [{"phase": phase, "elapsed_s": t, "sent": sent, "in_flight": sent - done, "done": done, "failed": 0}]


def test_slope_and_margin_of_error() -> None:
    xs = [float(i) for i in range(20)]
    s = fit_slope(xs, [2 * x + 1 for x in xs])
    assert s is not None and abs(s.slope - 2) < 1e-9 and s.moe < 1e-6 and s.rising(1.0)
    rng = random.Random(1)
    flat = fit_slope(xs, [5 + rng.gauss(0, 1) for _ in xs])
    assert flat is not None and not flat.rising(1.0)
    assert fit_slope([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None and fit_slope([1.0], [1.0]) is None


def test_growing_queue_with_short_completions_is_saturated() -> None:
    det = SaturationDetector(offered_rps=10.0, min_duration_s=5)
    reason = None
    for t in range(1, 30):
        reason = det.observe(lines(float(t), done=6 * t))  # 6/s of 10/s offered: 4 more due each second
        if reason:
            break
    assert reason is not None and "over-saturated" in reason and "completions 6.00/s of 10/s" in reason
    assert 5 <= t <= 8  # judged as soon as allowed, not at the end of the window


def test_steady_load_is_not_saturated() -> None:
    rng = random.Random(0)
    det = SaturationDetector(offered_rps=10.0, min_duration_s=5)
    for t in range(1, 60):
        assert det.observe(lines(float(t), done=10 * t - 8 + rng.randint(-3, 3))) is None


def test_closed_loop_warmup_and_after_the_last_arrival_are_never_judged() -> None:
    det = SaturationDetector(offered_rps=None)
    assert all(det.observe(lines(float(t), t)) is None for t in range(1, 20))
    det = SaturationDetector(offered_rps=10.0, min_duration_s=1)
    assert all(det.observe(lines(float(t), t, phase="warmup")) is None for t in range(1, 20))
    det = SaturationDetector(offered_rps=10.0, min_duration_s=1, arrivals_end_s=0.5)
    assert all(det.observe(lines(float(t), t, phase="drain")) is None for t in range(1, 20))


def test_requests_not_yet_due_are_not_a_backlog() -> None:
    """Open loop hands out every request of the window at once; only those due count."""
    det = SaturationDetector(offered_rps=10.0, min_duration_s=3)
    assert all(det.observe(lines(float(t), done=10 * t - 3, phase="drain", sent=200)) is None for t in range(1, 20))


def test_ttft_trend_read_from_the_requests_file(tmp_path: Path) -> None:
    """In-flight rising and TTFT climbing (completions keep up in count): saturated, via the file."""
    det = SaturationDetector(offered_rps=10.0, run_dir=tmp_path, min_duration_s=5)
    path = tmp_path / "requests.jsonl"
    reason = None
    with open(path, "a") as f:
        for t in range(1, 30):
            for k in range(10):
                sent = int((t + k / 10) * 1e9)
                f.write(json.dumps({"warmup": False, "intended_ns": sent, "ttft_ms": 100.0 + 80 * t + k}) + "\n")
            f.write('{"partial line')  # a half-written line is left for the next read
            f.flush()
            reason = det.observe(lines(float(t), done=int(9.5 * t)))  # completions keep up within 10%
            f.write('"}\n')
            if reason:
                break
    assert reason is not None and "TTFT +" in reason
    assert 60 < det.last["ttft_slope_ms_per_s"] < 100  # the staircase's slope: 80 ms per s
