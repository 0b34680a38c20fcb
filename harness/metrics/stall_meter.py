"""A jHiccup-style stall meter: a thread that sleeps 1 ms and records how late it woke.

The VM this project runs on showed single-core stalls up to 1.3 s; a stall inside a measured
window inflates latencies that no engine caused. Stalls above a threshold are kept with their
wall time so the summary can say which windows contain them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.metrics.hdr import Histogram
from harness.signals import ParentWatch


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

    def summary(self, window_start: float | None = None, window_end: float | None = None) -> dict[str, Any]:
        inside = [
            (t, ms)
            for t, ms in self.stalls
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


class StallMeterProcess:
    """The same meter in its own process, for processes where threads are greenlets.

    Under Locust (gevent), a thread would measure the event loop, not the host. This runs
    `python -m harness.metrics.stall_meter OUT PARENT_PID` and reads what it wrote when stopped.
    The meter exits by itself once this process is gone (killed outright, a test's Locust that
    never stopped it): it runs in its own session, so nothing else would stop it (an orphaned
    meter was seen 2 h after its test).
    """

    def __init__(self, out_path: Path) -> None:
        self.out_path = out_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> StallMeterProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.metrics.stall_meter", str(self.out_path), str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def summary(self, window_start: float | None = None, window_end: float | None = None) -> dict[str, Any]:
        self.stop()
        try:
            data = json.loads(self.out_path.read_text())
        except (OSError, ValueError):
            return {}
        meter = StallMeter(threshold_ms=data.get("threshold_ms", 20.0))
        meter.stalls = [tuple(s) for s in data.get("stalls", [])]
        meter.hist = Histogram.from_dict(data["hist"]) if data.get("hist") else meter.hist
        return meter.summary(window_start, window_end)


#: how often the meter looks whether its parent is still there
PARENT_CHECK_S = 0.5


def main(argv: list[str]) -> int:
    """Run the meter until SIGTERM/SIGINT, then write its stalls and histogram to argv[0]. When
    the parent (argv[1], else the process that started it) is gone, exit without writing: nobody
    will read it (signals.ParentWatch, as the load processes do)."""
    out = Path(argv[0])
    parent = ParentWatch(int(argv[1]) if len(argv) > 1 else None)
    meter = StallMeter().start()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_a: done.set())
    while not done.wait(PARENT_CHECK_S):
        if parent.orphaned:
            meter.stop()
            return 1
    meter.stop()
    out.write_text(
        json.dumps({"threshold_ms": meter.threshold_ns / 1e6, "stalls": meter.stalls, "hist": meter.hist.to_dict()})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
