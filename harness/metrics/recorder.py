"""Per-process aggregation of finished requests into HDR histograms and counters.

One `MetricSet` per process; `record()` runs once per finished request (never per token on the
read path). Sets serialise with `to_dict()` and merge losslessly with `merge_dict()`, which is how
distributed workers' measurements reach the master. `summarize()` produces the summary blocks.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.metrics.hdr import COUNT, LATENCY, Histogram
from harness.metrics.record import RequestRecord, meets_slo

ALL = "_all"
LATENCY_NAMES = ("ttft", "itl_chunk", "itl_token", "tpot", "e2e", "send_lag")
HIST_NAMES = (*LATENCY_NAMES, "tokens_per_chunk")
NS_PER_MS = 1e6


class ClassMetrics:
    """Histograms and counters for one request class (or all of them)."""

    def __init__(self) -> None:
        self.hist: dict[str, Histogram] = {name: Histogram(LATENCY) for name in LATENCY_NAMES}
        self.hist["tokens_per_chunk"] = Histogram(COUNT)
        self.counts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()

    def record(self, rec: RequestRecord, good: bool) -> None:
        c = self.counts
        if not rec.ok:
            c["failed"] += 1
            self.errors[rec.error_kind or "unknown"] += 1
            return
        c["completed"] += 1
        c["good"] += good
        c["input_tokens"] += rec.input_tokens if rec.input_tokens is not None else rec.intended_input_tokens
        c["output_tokens"] += rec.output_tokens or 0
        c[f"output_source:{rec.output_source}"] += 1
        h = self.hist
        ttft = rec.ttft_ns
        if ttft is not None:
            h["ttft"].record(ttft)
            h["e2e"].record(rec.e2e_ns)  # type: ignore[arg-type]
        tpot = rec.tpot_ns
        if tpot is not None:
            h["tpot"].record(round(tpot))
        lag = rec.send_lag_ns
        if lag is not None:
            h["send_lag"].record(lag)
        times, tokens = rec.chunk_ns, rec.chunk_tokens
        itl_chunk, itl_token, per_chunk = h["itl_chunk"], h["itl_token"], h["tokens_per_chunk"]
        for i, k in enumerate(tokens):
            per_chunk.record(max(k, 1))
            if i == 0:
                continue
            gap = times[i] - times[i - 1]
            itl_chunk.record(gap)
            if k > 1:
                itl_token.record(gap // k, k)
            else:
                itl_token.record(gap)

    def merge(self, other: ClassMetrics) -> None:
        for name, hist in other.hist.items():
            self.hist[name].merge(hist)
        self.counts.update(other.counts)
        self.errors.update(other.errors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hist": {name: h.to_dict() for name, h in self.hist.items()},
            "counts": dict(self.counts),
            "errors": dict(self.errors),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassMetrics:
        out = cls()
        for name, hd in data.get("hist", {}).items():
            out.hist[name] = Histogram.from_dict(hd)
        out.counts.update(data.get("counts", {}))
        out.errors.update(data.get("errors", {}))
        return out

    def summarize(self, duration_s: float) -> dict[str, Any]:
        c = self.counts
        dur = duration_s if duration_s > 0 else float("nan")
        completed, failed = c["completed"], c["failed"]
        sources = {k.split(":", 1)[1]: v for k, v in c.items() if k.startswith("output_source:")}
        return {
            "requests": {
                "completed": completed,
                "failed": failed,
                "errors_by_kind": dict(sorted(self.errors.items())),
                "rps": _rate(completed, dur),
            },
            "tokens": {
                "input_total": c["input_tokens"],
                "output_total": c["output_tokens"],
                "input_per_s": _rate(c["input_tokens"], dur),
                "output_per_s": _rate(c["output_tokens"], dur),
                "output_count_source": sources,
            },
            "latency_ms": {name: self.hist[name].stats(NS_PER_MS) for name in LATENCY_NAMES},
            "tokens_per_chunk": self.hist["tokens_per_chunk"].stats(1.0),
            "goodput": {
                "good": c["good"],
                "total": completed + failed,
                "fraction": (c["good"] / (completed + failed)) if (completed + failed) else None,
                "rps": _rate(c["good"], dur),
            },
        }


def _rate(n: float, duration_s: float) -> float:
    value = n / duration_s
    return 0.0 if value != value else value  # NaN (no duration) -> 0


class MetricSet:
    """All classes plus the overall `_all` block."""

    def __init__(self, slos: dict[str, dict[str, float | None]] | None = None) -> None:
        self.slos = slos or {}
        self.classes: dict[str, ClassMetrics] = {ALL: ClassMetrics()}

    def record(self, rec: RequestRecord) -> bool:
        """Add one finished (non-warmup) request; returns whether it met its SLO."""
        good = meets_slo(rec, self.slos.get(rec.class_name, self.slos.get(ALL, {})))
        cls = self.classes.get(rec.class_name)
        if cls is None:
            cls = self.classes[rec.class_name] = ClassMetrics()
        cls.record(rec, good)
        self.classes[ALL].record(rec, good)
        return good

    def merge(self, other: MetricSet) -> None:
        for name, cm in other.classes.items():
            self.classes.setdefault(name, ClassMetrics()).merge(cm)

    def to_dict(self) -> dict[str, Any]:
        return {name: cm.to_dict() for name, cm in self.classes.items()}

    def merge_dict(self, data: dict[str, Any]) -> None:
        for name, cd in data.items():
            self.classes.setdefault(name, ClassMetrics()).merge(ClassMetrics.from_dict(cd))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MetricSet:
        out = cls()
        out.merge_dict(data)
        return out

    def encoded_histograms(self) -> dict[str, dict[str, str]]:
        """{class: {metric: HDR V2 base64}} for histograms.json consumers that only want HDR."""
        return {name: {m: h.to_dict()["hdr"] for m, h in cm.hist.items()} for name, cm in self.classes.items()}
