"""A kind's /metrics profile: its metric names -> the harness's canonical quantities.

A profile is data (candidate names per canonical quantity) plus a few overridable methods for what
is not a plain name lookup (vLLM's `cache_config_info` labels, TGI's token budget ratio).
Candidate names are normalized (`:` -> `_`, see exposition.py); the first candidate present wins,
so an engine exposing both a deprecated and a current name is not counted twice.

Aggregation over series: samples that differ only in `shard_labels` (SGLang tensor/pipeline ranks
reporting the same scheduler state) are collapsed with max; everything else (vLLM `engine`,
SGLang `dp_rank`, `finished_reason`, ...) is summed -- or averaged for fractions (`mean_gauges`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

#: a series' labels, sorted, without `__name__`
Labels = tuple[tuple[str, str], ...]


class Samples(Protocol):
    """One scrape's samples by normalized name (harness.telemetry.exposition.Snapshot)."""

    samples: dict[str, list[tuple[Labels, float]]]

    def get(self, name: str) -> list[tuple[Labels, float]]: ...


#: canonical gauges sampled each scrape
GAUGES = ("kv_usage", "running", "waiting")
#: canonical counters (window deltas)
COUNTERS = (
    "preemptions",
    "prefix_queries",
    "prefix_hits",
    "prompt_tokens",
    "prompt_tokens_cached",  # vLLM: once per request (prefix_queries count every admission attempt)
    "generation_tokens",
    "requests_finished",
    "spec_drafts",
    "spec_draft_tokens",
    "spec_accepted_tokens",
)
#: canonical histograms (engine-side latencies)
HISTOGRAMS = ("ttft", "itl", "e2e", "queue", "prefill", "decode")


@dataclass(frozen=True)
class Profile:
    name: str
    #: normalized name prefixes that identify the engine on a page (detection)
    prefixes: tuple[str, ...]
    #: PromQL regex for the prefix, matching both spellings (`vllm[:_]`)
    prom_prefix: str
    gauges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    counters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: canonical counters that are the sum of several engine counters (llama.cpp counts prompt
    #: tokens it computed and tokens it reused from its cache apart); takes precedence over `counters`
    summed_counters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: canonical -> histogram base names (without _bucket/_sum/_count)
    histograms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: histogram unit -> milliseconds
    histogram_scale_ms: float = 1000.0
    #: counters kept per value of a label: canonical -> (candidate names, label)
    labelled_counters: Mapping[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    #: extra names read by `capacity()` / `extra_gauges()`
    info_names: tuple[str, ...] = ()
    shard_labels: frozenset[str] = frozenset()
    mean_gauges: frozenset[str] = frozenset({"kv_usage"})
    notes: tuple[str, ...] = ()

    # ------------------------------------------------------------------ names
    def counter_like_names(self) -> set[str]:
        """Monotonic series: counters, labelled counters and histogram components."""
        names: set[str] = set()
        for cands in self.counters.values():
            names.update(cands)
        for parts in self.summed_counters.values():
            names.update(parts)
        for cands, _label in self.labelled_counters.values():
            names.update(cands)
        for cands in self.histograms.values():
            for base in cands:
                names.update((f"{base}_bucket", f"{base}_sum", f"{base}_count"))
        return names

    def gauge_names(self) -> set[str]:
        names: set[str] = set(self.info_names)
        for cands in self.gauges.values():
            names.update(cands)
        return names

    def wanted(self) -> set[str]:
        return self.counter_like_names() | self.gauge_names()

    def strip_prefix(self, name: str) -> str:
        for p in self.prefixes:
            if name.startswith(p):
                return name[len(p) :]
        return name

    # ------------------------------------------------------------------ aggregation
    def collapse(self, items: Iterable[tuple[Labels, float]], *, mean: bool = False) -> float | None:
        """Max over shard labels, then sum (or mean) over the rest. None when no series."""
        groups: dict[Labels, float] = {}
        for labels, value in items:
            key = tuple(kv for kv in labels if kv[0] not in self.shard_labels)
            groups[key] = max(groups.get(key, value), value)
        if not groups:
            return None
        total = sum(groups.values())
        return total / len(groups) if mean else total

    def first_present(self, snap_or_names: Samples | Mapping, candidates: tuple[str, ...]) -> str | None:
        names = snap_or_names if isinstance(snap_or_names, Mapping) else snap_or_names.samples
        for c in candidates:
            if c in names:
                return c
        return None

    def select(self, canonical: str, items: list[tuple[Labels, float]]) -> list[tuple[Labels, float]]:
        """Hook to drop series that would double count (SGLang `cache_source="total"`)."""
        return items

    # ------------------------------------------------------------------ per-scrape values
    def gauge(self, snap: Samples, canonical: str) -> float | None:
        name = self.first_present(snap, self.gauges.get(canonical, ()))
        if name is None:
            return None
        return self.collapse(self.select(canonical, snap.get(name)), mean=canonical in self.mean_gauges)

    def gauge_values(self, snap: Samples) -> dict[str, float | None]:
        out = {g: self.gauge(snap, g) for g in GAUGES}
        out.update(self.extra_gauges(snap))
        return out

    def extra_gauges(self, snap: Samples) -> dict[str, float | None]:
        """Engine-specific gauges sampled over the window (SGLang's spec acceptance gauges)."""
        return {}

    def counter_total(self, snap: Samples, canonical: str) -> float | None:
        """Raw cumulative value in one scrape (for the time series, not for window deltas)."""
        parts = [n for n in self.summed_counters.get(canonical, ()) if n in snap.samples]
        if parts:
            return sum(self.collapse(self.select(canonical, snap.get(n))) or 0.0 for n in parts)
        name = self.first_present(snap, self.counters.get(canonical, ()))
        if name is None:
            return None
        return self.collapse(self.select(canonical, snap.get(name)))

    def capacity(self, snap: Samples) -> dict[str, float | int | None]:
        """{kv_capacity_tokens, block_size} from whatever the engine exposes."""
        return {"kv_capacity_tokens": None, "block_size": None}
