"""Cost of the live exporter's per-request `observe()` (load side, run in the event loop's idle
time) and of its once-a-second flush, by tokens per request. Prints figures; asserts nothing
(timing belongs here, not in the unit tests).

    python bench/exporter_cost.py
"""

from __future__ import annotations

import random
import time

from harness.metrics.exporter import LoadMetrics
from harness.metrics.record import RequestRecord


def main() -> None:
    lm = LoadMetrics()
    rnd = random.Random(5)
    costs: dict[int, float] = {}
    for n in (16, 64, 256, 1024):
        recs = []
        for i in range(300):
            t0 = 10**12 + i
            chunks = [t0 + 20_000_000 + j * rnd.randint(5_000_000, 30_000_000) for j in range(n)]
            recs.append(
                RequestRecord(
                    index=i,
                    class_name="c",
                    intended_ns=t0,
                    sent_ns=t0 + 50_000,
                    chunk_ns=chunks,
                    chunk_tokens=[1] * n,
                    output_tokens=n,
                    input_tokens=500,
                )
            )
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for r in recs:
                lm.observe(r)
            best = min(best, (time.perf_counter() - t) / len(recs))
        costs[n] = best * 1e6
    t = time.perf_counter()
    lm.flush()
    flush_us = (time.perf_counter() - t) * 1e6
    print(
        "exporter observe() per request: "
        + ", ".join(f"{n} tokens {c:.1f} us" for n, c in costs.items())
        + f"; flush (1/s) {flush_us:.0f} us"
    )


if __name__ == "__main__":
    main()
