"""A jHiccup-style stall meter: a thread that sleeps 1 ms and records how late it woke.

The VM this project runs on showed single-core stalls up to 1.3 s; a stall inside a measured
window inflates latencies that no engine caused. Stalls above a threshold are kept with their
wall time so the summary can say which windows contain them.
"""

from __future__ import annotations

import threading
import time

from harness.metrics.hdr import Histogram


class StallMeter:
    def __init__(self, interval_s: float = 0.001, threshold_ms: float = 20.0) -> None:
        self.interval_s = interval_s
        self.threshold_ns = int(threshold_ms * 1e6)
        self.hist = Histogram()
        self.stalls: list[tuple[float, float]] = []  # (wall time, stall ms)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-meter", daemon=True)

    def start(self) -> StallMeter:
        self._thread.start()
        return self

    def _run(self) -> None:
        interval_ns = int(self.interval_s * 1e9)
        perf = time.perf_counter_ns
        while not self._stop.is_set():
            t0 = perf()
            time.sleep(self.interval_s)
            late = perf() - t0 - interval_ns
            if late < 0:
                late = 0
            self.hist.record(late)
            if late >= self.threshold_ns:
                self.stalls.append((time.time(), late / 1e6))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1)

    def summary(self, window_start: float | None = None, window_end: float | None = None) -> dict:
        inside = [
            (t, ms) for t, ms in self.stalls
            if (window_start is None or t >= window_start) and (window_end is None or t - ms / 1e3 <= window_end)
        ]
        stats = self.hist.stats(1e6)
        return {
            "threshold_ms": self.threshold_ns / 1e6,
            "stalls_in_window": len(inside),
            "max_stall_ms": max((ms for _, ms in inside), default=0.0),
            "stall_times": [round(t, 3) for t, _ in inside[:50]],
            "wakeup_late_p99_ms": stats["p99"],
            "wakeup_late_max_ms": stats["max"],
        }
