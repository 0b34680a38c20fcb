"""Where each request's TTFT went, kept so that the tail can be split as well as the mean.

With the server's own timing (harness.client.server_timing) a request's client TTFT is the sum of
four parts: send lag (open loop: sent later than intended), queue and prefill (as the server
measured them) and network (the rest: the wire both ways, HTTP, the server's frontend). The
parts' percentiles are ordinary histograms (harness.metrics.table: ttft_queue, ttft_prefill,
ttft_network); what histograms cannot say is which part the *slow* requests spent their time in.

So the sums of every part are kept per TTFT bucket (a quarter octave wide: 25 buckets cover 1 ms to
80 ms), from which the share of each part among the requests at or above any TTFT quantile is read
(the p99 tail's shares), plus the few slowest requests with their parts for the report. Both are
bounded in size and merge losslessly across load processes, like the histograms.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

from harness.metrics.table import Derived

PARTS = ("send_lag", "network", "queue", "prefill")
BUCKETS_PER_OCTAVE = 4
SLOWEST = 5
TAIL_QUANTILE = 0.99


def _bucket(ttft_ns: int) -> int:
    return int(math.log2(max(ttft_ns, 1)) * BUCKETS_PER_OCTAVE)


def _floor_ns(bucket: int) -> float:
    return math.pow(2.0, bucket / BUCKETS_PER_OCTAVE)


class TtftParts:
    """Per class (or group): sums of each TTFT part by TTFT bucket, and the slowest requests."""

    __slots__ = ("buckets", "partial", "slowest")

    def __init__(self) -> None:
        #: bucket -> [requests, ttft sum, then one sum per PARTS entry] (ns)
        self.buckets: dict[int, list[int]] = {}
        self.slowest: list[tuple[int, str, list[int]]] = []  # min-heap of (ttft, request id, parts)
        self.partial = 0  # requests whose server timing could not split TTFT (no queue time)

    def record(self, rec_id: str, has_timing: bool, d: Derived) -> None:
        if d.ttft is None or d.network is None or d.queue is None or d.prefill is None:
            self.partial += has_timing
            return
        parts = [d.send_lag or 0, d.network, d.queue, d.prefill]
        row = self.buckets.get(_bucket(d.ttft))
        if row is None:
            row = self.buckets[_bucket(d.ttft)] = [0] * (2 + len(PARTS))
        row[0] += 1
        row[1] += d.ttft
        for i, p in enumerate(parts):
            row[2 + i] += p
        item = (d.ttft, rec_id, parts)
        if len(self.slowest) < SLOWEST:
            heapq.heappush(self.slowest, item)
        elif d.ttft > self.slowest[0][0]:
            heapq.heapreplace(self.slowest, item)

    def merge(self, other: TtftParts) -> None:
        for k, row in other.buckets.items():
            mine = self.buckets.setdefault(k, [0] * len(row))
            for i, v in enumerate(row):
                mine[i] += v
        for item in other.slowest:
            if len(self.slowest) < SLOWEST:
                heapq.heappush(self.slowest, item)
            elif item[0] > self.slowest[0][0]:
                heapq.heapreplace(self.slowest, item)
        self.partial += other.partial

    def to_dict(self) -> dict[str, Any]:
        return {
            "buckets": {str(k): v for k, v in self.buckets.items()},
            "slowest": [[t, i, p] for t, i, p in self.slowest],
            "partial": self.partial,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TtftParts:
        out = cls()
        out.buckets = {int(k): list(v) for k, v in (data.get("buckets") or {}).items()}
        out.slowest = [(int(t), str(i), list(p)) for t, i, p in data.get("slowest") or []]
        heapq.heapify(out.slowest)
        out.partial = int(data.get("partial", 0))
        return out

    def summarize(self) -> dict[str, Any] | None:
        """The parts' mean and share of TTFT over every split request and over the p99 tail, and
        the slowest requests; None when no request could be split."""
        rows = sorted(self.buckets.items())
        n = sum(r[0] for _k, r in rows)
        if not n:
            return {"requests": 0, "partial": self.partial} if self.partial else None
        # the tail: whole buckets from the top until they hold at least 1% of the requests
        want = max(1, math.ceil(round(n * (1 - TAIL_QUANTILE), 6)))  # round: 100 x 0.01 is 1.0000000000000009
        tail: list[int] = [0] * (2 + len(PARTS))
        floor = 0.0
        for k, row in reversed(rows):
            for i, v in enumerate(row):
                tail[i] += v
            floor = _floor_ns(k)
            if tail[0] >= want:
                break
        total = [sum(r[i] for _k, r in rows) for i in range(2 + len(PARTS))]
        ms = 1e6

        def block(sums: list[int]) -> dict[str, Any]:
            count, ttft = sums[0], sums[1]
            return {
                "requests": count,
                "mean_ms": {p: sums[2 + i] / count / ms for i, p in enumerate(PARTS)},
                "share": {p: (sums[2 + i] / ttft if ttft else None) for i, p in enumerate(PARTS)},
            }

        return {
            "requests": n,
            "partial": self.partial,
            **block(total),
            "tail": {"quantile": TAIL_QUANTILE, "ttft_from_ms": floor / ms, **block(tail)},
            "slowest": [
                {"id": i, "ttft_ms": t / ms, "parts_ms": {p: v / ms for p, v in zip(PARTS, parts, strict=True)}}
                for t, i, parts in sorted(self.slowest, reverse=True)
            ],
        }
