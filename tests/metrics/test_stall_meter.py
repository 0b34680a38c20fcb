"""The stall meter: which stalls fall inside a window (hand-made stall lists), and a real run."""

from __future__ import annotations

import time

from waiting import wait_until

from harness.metrics.stall_meter import StallMeter


def test_window_filter_on_hand_made_stalls() -> None:
    m = StallMeter(threshold_ms=20)
    # (wall time the stall ended, stall length ms)
    m.stalls = [(100.0, 30.0), (105.0, 500.0), (110.2, 400.0), (120.0, 50.0)]
    s = m.summary(window_start=104.0, window_end=110.0)
    # 105.0 ends inside; 110.2 started at 109.8 (inside); 100.0 and 120.0 are outside
    assert s["stalls_in_window"] == 2 and s["max_stall_ms"] == 500.0
    assert s["stall_times"] == [105.0, 110.2]
    assert m.summary()["stalls_in_window"] == 4
    assert s["threshold_ms"] == 20.0


def test_runs_and_stops() -> None:
    m = StallMeter(interval_s=0.001).start()
    wait_until(lambda: m.hist.count > 0, "the meter's first wake-up")
    m.stop()
    assert not m._thread.is_alive()
    assert m.hist.count > 0  # it woke up and recorded lateness
    n = m.hist.count
    time.sleep(0.01)  # not a wait for anything: ten of its intervals, in which a wake-up would show
    assert m.hist.count == n  # and stopped
