"""Garbage-collector policy for load processes.

Measured here: with the default thresholds a collection paused a Locust process up to 131 ms
(LOCUST.md); with `gc.freeze()` and thresholds of 50,000 the pauses still made 128 streams'
reads late enough that events coalesced (ITL p99 off by 3-5 ms). So automatic collection is off
while load runs; a greenlet collects the young generations only when the event loop is idle
(young objects are few because the read path frees by reference counting), and the pauses are
recorded so the summary can show them.
"""

from __future__ import annotations

import gc
import time

import gevent


class GCPolicy:
    def __init__(self, interval_s: float = 5.0) -> None:
        self.interval_s = interval_s
        self.collections = 0
        self.max_pause_ms = 0.0
        self.total_pause_ms = 0.0
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> GCPolicy:
        gc.collect()
        gc.freeze()  # the startup heap (Locust, numpy, ...) is never scanned again
        gc.disable()
        self._greenlet = gevent.spawn(self._run)
        return self

    def _run(self) -> None:
        n = 0
        while True:
            gevent.sleep(self.interval_s)
            gevent.idle()
            n += 1
            t0 = time.perf_counter()
            gc.collect(0)
            pause = (time.perf_counter() - t0) * 1e3
            self.collections += 1
            self.total_pause_ms += pause
            self.max_pause_ms = max(self.max_pause_ms, pause)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
        gc.enable()

    def summary(self) -> dict:
        return {
            "policy": "manual young-generation collections when idle",
            "collections": self.collections,
            "max_pause_ms": round(self.max_pause_ms, 3),
            "total_pause_ms": round(self.total_pause_ms, 3),
        }
