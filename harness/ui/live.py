"""Live statistics of the run in progress: the workers' interval HDR deltas merged.

Percentiles are those of the measured window so far (lossless merges, not Locust's rounded
buckets); rates and the chart's percentiles cover the last RATE_WINDOW_S seconds. The charted
metrics are the metric table's "chart" entries (harness.metrics.table): their series are
`<short>_p50` and `<short>_p99`, and `chart_specs` tells the page which charts to draw (`specs`
likewise its p99 cards and per-class percentile columns, the "ui_table" place).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from harness.metrics.hdr import PERCENTILES
from harness.metrics.recorder import ALL, ClassMetrics, MetricSet, histogram_for
from harness.metrics.table import Metric, shown

RATE_WINDOW_S = 10.0
SERIES_MAX = 900
NS_PER_MS = 1e6


CHART_STATS = ("p50", "p99")  # the lines of each metric chart


def charted() -> tuple[Metric, ...]:
    """The metrics the live page charts (read at call time: the table is the one place)."""
    return shown("chart")


def chart_key(m: Metric) -> str:
    return m.short or m.name


def specs(place: str) -> list[dict[str, str]]:
    """What the page needs to show each metric of `place`: its key (the class rows' key; for
    charts the series `<key>_p50`, `<key>_p99`, element `c-<key>`), title and unit."""
    return [{"key": chart_key(m), "label": chart_key(m).upper(), "unit": m.ui_unit or m.unit} for m in shown(place)]


def chart_specs() -> list[dict[str, str]]:
    """The live charts, one per metric of the table's "chart" place."""
    return specs("chart")


class _Second:
    """What the last-seconds view keeps of one second of deltas: counts per class, and the
    histograms the charts need (all classes). Full per-class sets would cost ~1.3 MB each."""

    __slots__ = ("counts", "hist", "t")

    def __init__(self, t: int, metrics: tuple[Metric, ...]) -> None:
        self.t = t
        self.counts: dict[str, list[int]] = {}  # class -> [completed, output tokens]
        self.hist = {m.name: histogram_for(m) for m in metrics}


class LiveStats:
    """Merges the workers' interval histograms: the whole window so far (lossless, every class
    and metric), and per-second counts and the charted metrics' histograms for the last RATE_WINDOW_S."""

    def __init__(self) -> None:
        self.total = MetricSet()
        self.recent: deque[_Second] = deque()
        self.charted = charted()
        self.series: dict[str, list[Any]] = {
            k: []
            for k in (
                "t",
                "rps",
                "tok_s",
                *(f"{chart_key(m)}_{p}" for m in self.charted for p in CHART_STATS),
                "kv",
                "running",
                "waiting",
                "users",
            )
        }
        self.first_t: float | None = None

    def add(self, metrics: dict[str, Any]) -> None:
        now = time.time()
        if self.first_t is None:
            self.first_t = now
        delta = MetricSet.from_dict(metrics)
        self.total.merge(delta)
        second = int(now)
        if not self.recent or self.recent[-1].t != second:
            self.recent.append(_Second(second, self.charted))
        bucket = self.recent[-1]
        for name, cm in delta.by_class.items():
            c = bucket.counts.setdefault(name, [0, 0])
            c[0] += cm.counts["completed"]
            c[1] += cm.counts["output_tokens"]
            for m in self.charted:
                bucket.hist[m.name].merge(cm.hist[m.name])
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.recent and self.recent[0].t < now - RATE_WINDOW_S:
            self.recent.popleft()

    def _span(self, now: float) -> float:
        span = min(RATE_WINDOW_S, now - self.first_t) if self.first_t else RATE_WINDOW_S
        return max(span, 1.0)

    def rates(self) -> dict[str, dict[str, float]]:
        """{class or _all: {rps, tok_s}} over the last RATE_WINDOW_S seconds."""
        now = time.time()
        self._trim(now)
        span = self._span(now)
        sums: dict[str, list[int]] = {ALL: [0, 0]}
        for bucket in self.recent:
            for name, (n, tok) in bucket.counts.items():
                for key in (name, ALL):
                    acc = sums.setdefault(key, [0, 0])
                    acc[0] += n
                    acc[1] += tok
        return {name: {"rps": n / span, "tok_s": tok / span} for name, (n, tok) in sums.items()}

    def sample(self, engine: dict[str, Any], users: int) -> None:
        """One chart point: last-window rates and percentiles (all classes), engine gauges."""
        rates = self.rates()[ALL]
        merged = {m.name: histogram_for(m) for m in self.charted}
        for bucket in self.recent:
            for name, h in merged.items():
                h.merge(bucket.hist[name])
        s = self.series
        s["t"].append(round(time.time(), 1))
        s["rps"].append(round(rates["rps"], 3))
        s["tok_s"].append(round(rates["tok_s"], 1))
        for m in self.charted:
            h = merged[m.name]
            scale = NS_PER_MS if m.unit == "ms" else 1
            for p in CHART_STATS:
                s[f"{chart_key(m)}_{p}"].append(round(h.percentile(PERCENTILES[p]) / scale, 3) if h.count else None)
        s["kv"].append(engine.get("kv_usage"))
        s["running"].append(engine.get("running"))
        s["waiting"].append(engine.get("waiting"))
        s["users"].append(users)
        if len(s["t"]) > SERIES_MAX:
            for v in s.values():
                del v[: len(v) - SERIES_MAX]


def dist(cm: ClassMetrics, metric: str) -> dict[str, float | None]:
    st = cm.hist[metric].stats(NS_PER_MS)
    return {k: st.get(k) for k in ("p50", "p90", "p99", "mean", "max")} | {"count": st["count"]}


def class_view(name: str, cm: ClassMetrics, rate: dict[str, float] | None) -> dict[str, Any]:
    c = cm.counts
    return {
        "name": name,
        "requests": c["completed"],
        "failed": c["failed"],
        "output_tokens": c["output_tokens"],
        "rps": (rate or {}).get("rps", 0.0),
        "tok_s": (rate or {}).get("tok_s", 0.0),
        **{m.short or m.name: dist(cm, m.name) for m in shown("ui")},  # harness.metrics.table
        "errors": dict(sorted(cm.errors.items())),
    }
