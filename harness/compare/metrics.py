"""The key metrics that reports, `compare`, tune and the CI summary talk about: one definition each.

A definition says where the value lives in summary.json, its unit, which direction is better
(latency up = worse, throughput down = worse), and which per-request data can estimate its
run-to-run noise. Add a metric here and every table, comparison and summary knows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from harness.errors import UserError
from harness.metrics.table import shown
from harness.results.models.summary import RunSummary
from harness.results.run_metrics import BY_NAME as RUN


@dataclass(frozen=True)
class MetricDef:
    key: str  # what users type: ttft.p99, rps, ...
    label: str
    unit: str
    better: Literal["lower", "higher"]
    kind: Literal["latency", "throughput", "rate"]
    get: Callable[[RunSummary], float | None]
    #: per-request field whose resampling estimates the noise (latency metrics)
    record_field: str | None = None
    #: statistic over that field: a percentile (0-100) or "mean"
    stat: float | str | None = None
    #: per-request quantity summed per time slice (throughput metrics)
    slice_quantity: str | None = None
    #: ITL: gaps come from chunk_offsets_us/chunk_tokens, or the histogram
    itl: str | None = None
    #: engine metrics: the engine_metrics.jsonl counter whose per-slice increase estimates the
    #: noise, and the counter it is a share of (a hit rate: hits / queries), if any
    engine_counter: str | None = None
    engine_denominator: str | None = None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _lat(metric: str, stat: str) -> Callable[[RunSummary], float | None]:
    def get(s: RunSummary) -> float | None:
        d = s.latency_ms.get(metric)
        return _num(getattr(d, stat, None)) if d is not None and d.count else None

    return get


def _goodput_rps(s: RunSummary) -> float | None:
    """Goodput only where the summary has a goodput block (one rebuilt from requests.jsonl has none)."""
    return RUN["goodput_req_per_s"].get(s) if "overall" in s.goodput.model_fields_set else None


def _goodput_fraction(s: RunSummary) -> float | None:
    v = RUN["goodput_fraction"].get(s) if "overall" in s.goodput.model_fields_set else None
    return None if v is None else 100.0 * v


def _pct(get: Callable[[RunSummary], float | None]) -> Callable[[RunSummary], float | None]:
    def pct(s: RunSummary) -> float | None:
        v = get(s)
        return None if v is None else 100.0 * v

    return pct


def _defs() -> list[MetricDef]:
    out: list[MetricDef] = []
    for m in shown("compare"):  # the per-request distributions: harness.metrics.table
        short, source, label = m.short or m.name, m.name, (m.short or m.name).upper()
        for stat in ("p50", "p90", "p99", "mean"):
            pct: float | str = "mean" if stat == "mean" else float(stat[1:])
            out.append(
                MetricDef(
                    key=f"{short}.{stat}",
                    label=f"{label} {stat}",
                    unit="ms",
                    better="lower",
                    kind="latency",
                    get=_lat(source, stat),
                    record_field=m.record_field,
                    stat=pct,
                    itl="token" if source == "itl_token" else None,
                )
            )
    out += [
        # the run-level figures: harness.results.run_metrics (the table says where each comes from)
        MetricDef(
            "rps",
            "requests/s",
            "req/s",
            "higher",
            "throughput",
            lambda s: RUN["req_per_s"].get(s) or None,
            slice_quantity="requests",
        ),
        MetricDef(
            "output_tps",
            "output tokens/s",
            "tok/s",
            "higher",
            "throughput",
            lambda s: RUN["output_tok_per_s"].get(s) or None,
            slice_quantity="output_tokens",
        ),
        MetricDef(
            "input_tps",
            "input tokens/s",
            "tok/s",
            "higher",
            "throughput",
            lambda s: RUN["input_tok_per_s"].get(s) or None,
            slice_quantity="input_tokens",
        ),
        MetricDef("goodput_rps", "goodput", "req/s", "higher", "throughput", _goodput_rps, slice_quantity="good"),
        MetricDef("goodput_pct", "goodput share", "%", "higher", "rate", _goodput_fraction),
        MetricDef("error_rate", "failed requests", "%", "lower", "rate", RUN["error_rate"].get),
        # the engine's own counters over the window (not in the default family: `--metrics` them)
        MetricDef(
            "prefix_hit_rate",
            "prefix-cache hit rate",
            "%",
            "higher",
            "rate",
            _pct(RUN["prefix_hit_rate"].get),
            engine_counter="prefix_hits_total",
            engine_denominator="prefix_queries_total",
        ),
        MetricDef(
            "preemptions",
            "preemptions",
            "",
            "lower",
            "throughput",
            RUN["preemptions"].get,
            engine_counter="preemptions_total",
        ),
    ]
    return out


METRICS: dict[str, MetricDef] = {m.key: m for m in _defs()}

#: the engine's counters a comparison can add (tune's steps read them beside the default family)
ENGINE = ("prefix_hit_rate", "preemptions")

DEFAULT_COMPARE = (
    "ttft.p50", "ttft.p99", "itl.p50", "itl.p99", "tpot.p50", "e2e.p50", "e2e.p99",
    "rps", "output_tps", "goodput_rps", "error_rate",
)  # fmt: skip


def resolve(keys: list[str] | None) -> list[MetricDef]:
    if not keys:
        return [METRICS[k] for k in DEFAULT_COMPARE]
    out: list[MetricDef] = []
    bad: list[str] = []
    for key in keys:
        for part in key.split(","):
            part = part.strip()
            if not part:
                continue
            if part in METRICS:
                out.append(METRICS[part])
            else:
                bad.append(part)
    if bad:
        raise UserError(f"--metrics: unknown metric(s) {', '.join(bad)}; choose from: {', '.join(METRICS)}")
    return out
