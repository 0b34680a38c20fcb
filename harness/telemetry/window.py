"""Window arithmetic: counter deltas with resets, gauge statistics, histogram quantiles.

A `WindowAccumulator` is fed the baseline scrape (start of the measured window), every scrape in
the window, and the final one; it keeps O(series) state, so a long run costs no memory per scrape
beyond one float per gauge. Counters follow Prometheus `increase()` without extrapolation: per
series, a drop means the engine restarted and the new value is all increase; a series absent from
the baseline (a lazily created label child) starts from 0. Series are only then aggregated by the
profile, so a restart of one data-parallel engine does not hide the others' work.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from harness.engines.parts.metrics import Profile
from harness.metrics import percentile
from harness.telemetry.exposition import Labels, Snapshot


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> tuple[float, float, float] | None:
    """Prometheus `histogram_quantile` on cumulative (upper_bound, count) buckets.

    Returns (estimate, bucket_lower, bucket_upper) or None when there are no observations. As in
    Prometheus: linear interpolation inside the bucket holding the rank, the first bucket starts at
    0 (when its bound is positive), and a rank in the +Inf bucket returns the highest finite bound
    (bucket_upper is then inf). Non-monotonic counts (a reset between buckets) are made monotonic.
    """
    if not buckets:
        return None
    buckets = sorted(buckets)
    if not math.isinf(buckets[-1][0]) or len(buckets) < 2:
        return None
    fixed, running = [], 0.0
    for ub, c in buckets:
        running = max(running, c)
        fixed.append((ub, running))
    total = fixed[-1][1]
    if total <= 0:
        return None
    rank = q * total
    b = next(i for i, (_ub, c) in enumerate(fixed) if c >= rank)
    if b == len(fixed) - 1:
        return fixed[-2][0], fixed[-2][0], math.inf
    upper, count = fixed[b]
    if b == 0 and upper <= 0:
        return upper, upper, upper
    lower = 0.0
    if b > 0:
        lower, prev = fixed[b - 1]
        count -= prev
        rank -= prev
    return lower + (upper - lower) * (rank / count if count else 0.0), lower, upper


def _le(labels: Labels) -> tuple[float | None, Labels]:
    le, rest = None, []
    for k, v in labels:
        if k == "le":
            try:
                le = float(v)
            except ValueError:
                le = None
        else:
            rest.append((k, v))
    return le, tuple(rest)


class WindowAccumulator:
    def __init__(self, profile: Profile, baseline: Snapshot) -> None:
        self.profile = profile
        self.t_start = baseline.ts
        self.t_end = baseline.ts
        self.scrapes = 0
        #: scrapes in which some counter went down (engine restart)
        self.resets = 0
        self._monotonic = profile.counter_like_names()
        self._last: dict[tuple[str, Labels], float] = {}
        self._inc: dict[tuple[str, Labels], float] = {}
        self.gauges: dict[str, list[float]] = defaultdict(list)
        self.capacity: dict[str, float | int | None] = {"kv_capacity_tokens": None, "block_size": None}
        for name in self._monotonic & baseline.names():
            for labels, value in baseline.get(name):
                self._last[(name, labels)] = value
                self._inc[(name, labels)] = 0.0
        self._sample_gauges(baseline)

    @classmethod
    def from_idle(cls, profile: Profile, idle: Snapshot, baseline: Snapshot) -> WindowAccumulator:
        """Counters from `idle`, a scrape answered before the window opened with no request of the
        run sent since (no warmup), so it holds the counters' values at the window's start;
        gauges and the window's first time from `baseline`, the start mark's own scrape. A mark's
        scrape is sent when the window has already opened: on a busy 2-core box vLLM answered it
        after the first admissions (85 ms late: 8% of a 1.8-s cell's prompt tokens missed, the
        cold requests, so its prefix hit rate read high), or after all of them (CI: none seen)."""
        acc = cls(profile, idle)
        acc.gauges.clear()
        acc.scrapes = 0
        acc.add(baseline)
        acc.t_start = baseline.ts
        return acc

    # ------------------------------------------------------------------ feeding
    def add(self, snap: Snapshot, *, gauges: bool = True) -> None:
        """Fold in a scrape. `gauges=False`: counters only (a scrape after the window's end,
        needed for the final counter values but not a sample of the window's state)."""
        if snap.ts < self.t_end:
            return
        self.t_end = snap.ts
        reset = False
        for name in self._monotonic & snap.names():
            for labels, value in snap.get(name):
                key = (name, labels)
                prev = self._last.get(key)
                if prev is None:
                    inc = value  # created after the baseline: counted from zero
                elif value < prev:
                    inc = value  # reset (restart): everything since is new
                    reset = True
                else:
                    inc = value - prev
                self._inc[key] = self._inc.get(key, 0.0) + inc
                self._last[key] = value
        self.resets += reset
        if gauges:
            self._sample_gauges(snap)
        else:
            self.capacity.update({k: v for k, v in self.profile.capacity(snap).items() if v is not None})

    def _sample_gauges(self, snap: Snapshot) -> None:
        self.scrapes += 1
        for key, value in self.profile.gauge_values(snap).items():
            if value is not None and math.isfinite(value):
                self.gauges[key].append(value)
        cap = self.profile.capacity(snap)
        for k, v in cap.items():
            if v is not None:
                self.capacity[k] = v

    # ------------------------------------------------------------------ results
    @property
    def duration_s(self) -> float:
        return max(0.0, self.t_end - self.t_start)

    def _items(self, name: str) -> list[tuple[Labels, float]]:
        return [(labels, inc) for (n, labels), inc in self._inc.items() if n == name]

    def _present(self, candidates: tuple[str, ...]) -> str | None:
        names = {n for n, _ in self._inc}
        return next((c for c in candidates if c in names), None)

    def counter(self, canonical: str) -> float | None:
        names = {n for n, _ in self._inc}
        parts = [n for n in self.profile.summed_counters.get(canonical, ()) if n in names]
        if parts:
            return sum(self.profile.collapse(self.profile.select(canonical, self._items(n))) or 0.0 for n in parts)
        name = self._present(self.profile.counters.get(canonical, ()))
        if name is None:
            return None
        return self.profile.collapse(self.profile.select(canonical, self._items(name)))

    def labelled_counter(self, canonical: str) -> dict[str, float] | None:
        spec = self.profile.labelled_counters.get(canonical)
        if spec is None:
            return None
        candidates, label = spec
        name = self._present(candidates)
        if name is None:
            return None
        groups: dict[str, list[tuple[Labels, float]]] = defaultdict(list)
        for labels, inc in self._items(name):
            d = dict(labels)
            groups[d.get(label, "")].append((tuple(kv for kv in labels if kv[0] != label), inc))
        return {k: self.profile.collapse(v) or 0.0 for k, v in groups.items()}

    def histogram(self, canonical: str) -> dict | None:
        """{p50, p99, mean, count, p50_bucket_ms, p99_bucket_ms} in ms, or None if not exposed.
        A quantile inside the first bucket is None, its bucket [0, bound] says what is known."""
        bases = self.profile.histograms.get(canonical, ())
        base = next((b for b in bases if self._present((f"{b}_bucket",))), None)
        if base is None:
            return None
        scale = self.profile.histogram_scale_ms
        per_le: dict[float, list[tuple[Labels, float]]] = defaultdict(list)
        for labels, inc in self._items(f"{base}_bucket"):
            le, rest = _le(labels)
            if le is not None:
                per_le[le].append((rest, inc))
        buckets = [(le, self.profile.collapse(items) or 0.0) for le, items in per_le.items()]
        count = self.profile.collapse(self._items(f"{base}_count"))
        if count is None:
            count = max((c for le, c in buckets if math.isinf(le)), default=0.0)
        total = self.profile.collapse(self._items(f"{base}_sum"))
        out: dict = {"p50": None, "p99": None, "mean": None, "count": round(count)}
        if count > 0 and total is not None:
            out["mean"] = total / count * scale
        for q, key in ((0.5, "p50"), (0.99, "p99")):
            est = histogram_quantile(q, buckets)
            if est is not None:
                value, lo, hi = est
                # inside the first bucket (0 to its bound) interpolation only says "half the
                # bucket": vLLM's queue buckets start at 300 ms, so nothing waited read as a
                # 150 ms p50 (audits D8, GPU_VLLM 1). Only "below the bound" is known: no number
                # then, and the bucket says the bound.
                out[key] = None if lo <= 0 < hi else value * scale
                out[f"{key}_bucket_ms"] = [lo * scale, None if math.isinf(hi) else hi * scale]
        return out

    def gauge_stats(self, canonical: str, *, percentiles: bool = False) -> dict[str, float | None]:
        values = self.gauges.get(canonical) or []
        keys = ("mean", "p50", "p99", "max") if percentiles else ("mean", "max")
        if not values:
            return {k: None for k in keys}
        arr = np.asarray(values, dtype=float)
        out: dict[str, float | None] = {"mean": float(arr.mean()), "max": float(arr.max())}
        if percentiles:
            out["p50"], out["p99"] = percentile.of_values_many(arr, (50.0, 99.0))
        return {k: out[k] for k in keys}
