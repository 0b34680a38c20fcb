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
                ttft = 100.0 + 80 * t + k
                f.write(
                    json.dumps({"warmup": False, "intended_ns": sent, "ttft_ms": ttft, "e2e_ms": ttft + 500}) + "\n"
                )
            f.write('{"partial line')  # a half-written line is left for the next read
            f.flush()
            reason = det.observe(lines(float(t), done=int(9.5 * t)))  # completions keep up within 10%
            f.write('"}\n')
            if reason:
                break
    assert reason is not None and "TTFT +" in reason
    assert 60 < det.last["ttft_slope_ms_per_s"] < 100  # the staircase's slope: 80 ms per s


def replay(det: SaturationDetector, path: Path, done_by: list[dict], written: list[dict]) -> None:
    """Append the requests completed since the last call, as the load process flushes them."""
    new = [r for r in done_by if r not in written]
    with path.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in new)
    written += new


def test_a_stable_real_vllm_trial_is_not_judged_saturated(tmp_path: Path) -> None:
    """Two trials of real vLLM 0.26.0 on an H100 (chat, constant rate, 100% within the SLOs, TTFT
    flat at ~25 ms) that the detector stopped early before it left out the fill-up (in-flight
    climbing from 0 to rate x 1.3 s in the first second) and before a shortfall of completions
    had to exceed the fit's margin (1.83/s of 2.18/s from a dozen completions). Replayed as the
    capacity search feeds them: each progress line with the requests completed by then."""
    trials = json.loads((Path(__file__).parent / "data" / "h100_vllm_stable_trials.json").read_text())
    for name, trial in trials.items():
        window = [r for r in trial["requests"] if not r["warmup"]]
        t0 = min(r["intended_ns"] for r in window)
        (tmp_path / name).mkdir()
        det = SaturationDetector(offered_rps=trial["rate"], run_dir=tmp_path / name, arrivals_end_s=10.0)
        judged, written = [], []
        for line in trial["progress"]:
            end_s = line["elapsed_s"]
            done_by = [r for r in window if (r["intended_ns"] - t0) / 1e9 + r["e2e_ms"] / 1000 <= end_s]
            replay(det, tmp_path / name / "requests.jsonl", done_by, written)
            judged.append(det.observe([line]))
        assert judged == [None] * len(judged), (name, judged)
        assert det.last["achieved_rps"] > 0.85 * trial["rate"], det.last


def test_the_fill_up_is_left_out_but_a_saturated_trial_is_still_caught(tmp_path: Path) -> None:
    """A target carrying 6/s of 10/s offered with latencies growing with the queue: the fill-up
    left out is at most half the time elapsed, so the later half still shows the growth."""
    det = SaturationDetector(offered_rps=10.0, run_dir=tmp_path, min_duration_s=5)
    reason, written = None, []
    for t in range(1, 30):
        done = [
            {"warmup": False, "intended_ns": i * 10**8, "ttft_ms": 50.0 * i, "e2e_ms": 400.0 * i} for i in range(6 * t)
        ]
        replay(det, tmp_path / "requests.jsonl", done, written)
        reason = det.observe(lines(float(t), done=6 * t))
        if reason:
            break
    assert reason is not None and "over-saturated" in reason
    assert t <= 12


def test_nothing_is_judged_before_the_first_completion(tmp_path: Path) -> None:
    """In-flight climbing with nothing done is also a stable target whose requests outlast the
    time elapsed (5 s requests at 64 req/s fill to 320 in flight): without one completion the
    fill-up's length is unknown, so no verdict; the first completions allow one."""
    det = SaturationDetector(offered_rps=64.0, run_dir=tmp_path, min_duration_s=3)
    (tmp_path / "requests.jsonl").write_text("")
    assert all(det.observe(lines(float(t), done=0)) is None for t in range(1, 8))
    assert det.last == {}
