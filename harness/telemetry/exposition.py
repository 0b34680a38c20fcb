"""Prometheus exposition pages -> `Snapshot`: one scrape's samples under normalized names.

Names are normalized by replacing `:` with `_`, so `vllm:kv_cache_usage_perc` (plain text format,
what a bare GET returns) and `vllm_kv_cache_usage_perc` (what prometheus_client 0.26 writes in
OpenMetrics, hence what a Prometheus server stores: upstream client_python #1177) are one name.
Types are not trusted (the escaped OpenMetrics output loses them); profiles pick samples by name.
`_created` samples (prometheus_client's creation timestamps) are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from harness.engines.parts.metrics import Labels

#: Content-Type main types a /metrics endpoint may answer with
TEXT_TYPES = ("text/plain", "application/openmetrics-text")


class TelemetryUnavailable(Exception):
    """A metrics source cannot be used. `permanent`: retrying will not help (wrong content, 404);
    `unreachable`: nothing answered (refused, timed out)."""

    def __init__(self, reason: str, *, permanent: bool = False, unreachable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent
        self.unreachable = unreachable


def normalize(name: str) -> str:
    return name.replace(":", "_")


def labels_key(labels: dict[str, str]) -> Labels:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


@dataclass
class Snapshot:
    """One scrape: `samples[normalized_name]` = [(labels, value), ...]."""

    ts: float
    samples: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)

    def names(self) -> set[str]:
        return set(self.samples)

    def get(self, name: str) -> list[tuple[Labels, float]]:
        return self.samples.get(name, [])

    def add(self, name: str, labels: Labels, value: float) -> None:
        self.samples.setdefault(name, []).append((labels, value))

    def __len__(self) -> int:
        return sum(len(v) for v in self.samples.values())


def check_content_type(content_type: str | None, body_head: str) -> None:
    """Refuse pages that are clearly not Prometheus exposition (HTML error pages, JSON APIs)."""
    main = (content_type or "").split(";")[0].strip().lower()
    head = body_head.lstrip()[:64].lower()
    if main in TEXT_TYPES:
        if head.startswith(("<!doctype", "<html")):
            raise TelemetryUnavailable(f"metrics endpoint answered HTML labelled {main}", permanent=True)
        return
    if main:
        what = "HTML" if "html" in main else "JSON" if "json" in main else main
        raise TelemetryUnavailable(
            f"metrics endpoint answered {what} (Content-Type {main!r}), not Prometheus text exposition; "
            "point telemetry.metrics_url at the engine's Prometheus /metrics",
            permanent=True,
        )
    if head.startswith(("<", "{", "[")):
        raise TelemetryUnavailable(
            "metrics endpoint answered HTML/JSON without a Content-Type, not Prometheus text exposition",
            permanent=True,
        )


def sample_name(line: str) -> str:
    """The metric name of a sample line (before `{` or the first space)."""
    end = len(line)
    for sep in ("{", " ", "\t"):
        i = line.find(sep)
        if 0 <= i < end:
            end = i
    return line[:end]


def prefilter(text: str, wanted: set[str]) -> str:
    """Keep only sample lines whose normalized name is in `wanted` (comment lines dropped).

    Parsing is the dominant cost of a scrape; a vLLM page is mostly histogram buckets we need, but
    engines with many LoRA/multimodal/connector families produce far more than we read.
    """
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        if normalize(sample_name(line)) in wanted:
            out.append(line)
    out.append("")
    return "\n".join(out)


def names_in(text: str) -> set[str]:
    """Normalized names of the sample lines of a page (cheap; used to detect the engine)."""
    names = set()
    for line in text.splitlines():
        if line and line[0] != "#":
            names.add(normalize(sample_name(line)))
    return names


def _families(text: str, content_type: str | None) -> Iterable:
    main = (content_type or "").split(";")[0].strip().lower()
    if main == "application/openmetrics-text":
        from prometheus_client.openmetrics.parser import (
            text_string_to_metric_families as om_families,
        )

        try:
            return list(om_families(text))
        except Exception:  # escaped names confuse the strict parser: fall back
            pass
    return text_string_to_metric_families(text)


def parse(text: str, ts: float, *, content_type: str | None = None, wanted: set[str] | None = None) -> Snapshot:
    """Parse a page into a Snapshot. `wanted` (normalized sample names) filters before parsing.

    Raises TelemetryUnavailable when the page is not exposition text.
    """
    if wanted is not None:
        text = prefilter(text, wanted)
        content_type = "text/plain"
    snap = Snapshot(ts=ts)
    try:
        for family in _families(text, content_type):
            for s in family.samples:
                name = normalize(s.name)
                if name.endswith("_created"):
                    continue
                value = float(s.value)
                if math.isnan(value):
                    continue
                snap.add(name, labels_key(s.labels), value)
    except TelemetryUnavailable:
        raise
    except Exception as exc:  # the parser raises ValueError, IndexError, ...
        first = next((ln for ln in text.splitlines() if ln.strip()), "")[:80]
        raise TelemetryUnavailable(
            f"metrics page is not Prometheus exposition ({type(exc).__name__}: {exc}); first line: {first!r}",
            permanent=True,
        ) from None
    return snap
