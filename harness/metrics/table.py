"""The table of per-request distributions: one entry per metric, everything else iterates it.

Each entry says what the metric is called (the key in histograms.json and summary.json
`latency_ms`), its label and unit, how one request record yields its sample(s), the HDR range its
histogram needs, its requests.jsonl field, its live Prometheus histogram (name, buckets; the load
processes export it), and where it is shown. The recorder (harness.metrics.recorder), the live
exporter (harness.metrics.exporter), the summary schema's latency names (harness.results.schema),
the console table (harness.results.console), the report's tables and compare metrics
(harness.report), the sweep tables (harness.sweep.results), the web UI's LLM tab, cards and live
charts (harness.ui) and the Grafana tuning board (grafana/tuning_board.py) read this table, so
adding a metric is one entry here plus its test (tests/metrics/test_table.py).

Values are derived once per request (`derive`): a `Derived` holds the request's start, TTFT, E2E,
TPOT, send lag and content-chunk gaps, all integer nanoseconds from one monotonic clock except
TPOT (a float: (last - first chunk) / (N - 1)); consumers take their samples from it.

Definitions (see harness.metrics.record): start is the intended send time in open loop, the actual
send in closed loop; TTFT is the first chunk with content or reasoning; E2E the last content chunk;
ITL per chunk the gap between content chunks, per token a chunk of k tokens gives k samples of
gap // k; TPOT (E2E - TTFT) / (N - 1) with N output tokens; send lag actual - intended send.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from harness.metrics.record import RequestRecord

#: where a metric appears; an entry lists the places it belongs in
#: console: `harness run`'s table; report: the report's class table; ui: the web UI's JSON per class;
#: ui_table: a column group of Locust's LLM tab; compare: `harness compare --metrics`; grafana: the
#: tuning dashboard's client panels (a p99 stat, client beside engine, the mean); sweep: p50/p99 columns of summary.csv and the sweep tables;
#: chart: a live chart (p50, p99 over the last seconds) of the web UI's /llm page
Place = Literal["console", "report", "ui", "ui_table", "compare", "grafana", "sweep", "chart"]


@dataclass(slots=True)
class Derived:
    """One successful request's values, computed once (ns; TPOT a float)."""

    start: int
    ttft: int | None
    e2e: int | None
    tpot: float | None
    send_lag: int | None
    gaps: list[int]  # consecutive content-chunk gaps
    gap_tokens: list[int]  # tokens of the chunk that ends each gap
    chunk_tokens: list[int]
    #: TTFT's parts by the server's own timing (harness.client.server_timing), None where not reported:
    #: queue and prefill as the server measured them; network the rest of the client's TTFT after
    #: send lag, queue and prefill (the wire both ways, HTTP, the server's frontend, detokenizing)
    queue: int | None = None
    prefill: int | None = None
    network: int | None = None


def derive(rec: RequestRecord) -> Derived:
    times = rec.chunk_ns
    start = rec.intended_ns if rec.intended_ns is not None else rec.sent_ns
    n = rec.output_tokens
    ttft: int | None
    e2e: int | None
    tpot: float | None
    if times:
        first, last = times[0], times[-1]
        ttft, e2e = first - start, last - start
        tpot = (last - first) / (n - 1) if n is not None and n >= 2 else None
    else:
        ttft = e2e = tpot = None
    send_lag = rec.sent_ns - rec.intended_ns if rec.intended_ns is not None else None
    queue, prefill = rec.server_queue_ns, rec.server_prefill_ns
    network = None
    if ttft is not None and queue is not None and prefill is not None:
        network = ttft - (send_lag or 0) - queue - prefill
    return Derived(
        start=start,
        ttft=ttft,
        e2e=e2e,
        tpot=tpot,
        send_lag=send_lag,
        gaps=[b - a for a, b in itertools.pairwise(times)] if len(times) > 1 else [],
        gap_tokens=rec.chunk_tokens[1 : len(times)],
        chunk_tokens=rec.chunk_tokens,
        queue=queue,
        prefill=prefill,
        network=network,
    )


def _itl_token(d: Derived) -> list[int]:
    tokens = d.gap_tokens
    if len(tokens) == len(d.gaps) and tokens.count(1) == len(tokens):  # one token per chunk: the gaps
        return d.gaps[:]
    out: list[int] = []
    # fewer token counts than gaps: the gaps past them are dropped
    for gap, k in zip(d.gaps, d.gap_tokens, strict=False):
        if k > 1:
            out.extend([gap // k] * k)
        else:
            out.append(gap)
    return out


@dataclass(frozen=True)
class Live:
    """The metric's live Prometheus histogram (`harness_<name>_seconds`), exported by load processes."""

    name: str
    buckets: tuple[float, ...]  # seconds
    help: str

    @property
    def prometheus(self) -> str:
        """The exported histogram's name (its series add _bucket, _sum, _count)."""
        return f"harness_{self.name}_seconds"


@dataclass(frozen=True)
class Metric:
    name: str  # histograms.json / summary latency_ms key
    label: str  # console and report label
    unit: str  # "ms" (latency, stored in ns) or "" (a count)
    hdr: Literal["latency", "count"]  # the HDR range (harness.metrics.hdr LATENCY / COUNT)
    #: samples of one request: a scalar (None: no sample), or a list for per-chunk metrics
    sample: Callable[[Derived], int | list[int] | None]
    places: frozenset[str]
    digits: int = 1  # console decimals
    record_field: str | None = None  # requests.jsonl field (ms)
    live: Live | None = None
    short: str | None = None  # the name users type (compare --metrics, ui, sweep): ttft, itl, ...
    stats: tuple[str, ...] = ("p50", "p90", "p99")  # the report's class table rows
    optional: bool = False  # shown only when the run holds samples (send lag: open loop)
    rank: int = 0  # display order (console, report, UI)
    ui_unit: str | None = None  # the web UI's column unit when it differs from `unit`
    fallback: str | None = None  # the metric read where this one has no samples (sweep tables)


# --------------------------------------------------------------------------- buckets (seconds)
# Supersets of vLLM's bucket bounds in the range that matters (client and engine quantiles are
# interpolated on shared edges there), with finer steps where LLM latencies sit. (Not formatted:
# the bounds read as rows, not one number a line.)
# fmt: off
TTFT_BUCKETS = (0.005, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0,
                1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 80.0, 120.0, 300.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02, 0.025, 0.03, 0.035, 0.04,
               0.05, 0.06, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)
E2E_BUCKETS = (0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 40.0,
               50.0, 60.0, 90.0, 120.0, 240.0, 480.0, 960.0)
SEND_LAG_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0, 10.0)
# fmt: on

_ALL_PLACES = frozenset({"console", "report", "ui", "ui_table", "compare", "grafana", "sweep"})

#: the table, in storage order (histograms.json, summary.json latency_ms); `shown` sorts by `rank`
METRICS: tuple[Metric, ...] = (
    Metric(
        "ttft",
        "TTFT",
        "ms",
        "latency",
        lambda d: d.ttft,
        _ALL_PLACES | {"chart"},
        1,
        "ttft_ms",
        short="ttft",
        live=Live(
            "ttft",
            TTFT_BUCKETS,
            "Time to first token (first content chunk), client side, from the intended send in open loop.",
        ),
        stats=("p50", "p90", "p99", "max"),
        rank=0,
    ),
    Metric(
        "itl_chunk", "ITL per chunk", "ms", "latency", lambda d: d.gaps, frozenset({"console", "report"}), 2, rank=2
    ),
    Metric(
        "itl_token",
        "ITL per token",
        "ms",
        "latency",
        _itl_token,
        _ALL_PLACES | {"chart"},
        2,
        short="itl",
        live=Live(
            "itl",
            ITL_BUCKETS,
            "Inter-token latency per token: a chunk of k tokens after a gap g gives k samples of g/k.",
        ),
        rank=1,
        ui_unit="ms/token",
        fallback="itl_chunk",
    ),
    Metric(
        "tpot",
        "TPOT",
        "ms",
        "latency",
        lambda d: None if d.tpot is None else round(d.tpot),
        _ALL_PLACES - {"sweep"},
        2,
        "tpot_ms",
        short="tpot",
        live=Live("tpot", ITL_BUCKETS, "Time per output token per request: (E2E - TTFT) / (output tokens - 1)."),
        rank=3,
    ),
    Metric(
        "e2e",
        "E2E latency",
        "ms",
        "latency",
        lambda d: d.e2e,
        frozenset({"console", "report", "ui", "compare", "sweep", "grafana"}),
        1,
        "e2e_ms",
        short="e2e",
        stats=("p50", "p90", "p99", "max"),
        rank=4,
        live=Live("e2e", E2E_BUCKETS, "End-to-end request latency (last content chunk), client side."),
    ),
    Metric(
        "send_lag",
        "send lag (open loop)",
        "ms",
        "latency",
        lambda d: d.send_lag,
        frozenset({"console"}),
        2,
        "send_lag_ms",
        optional=True,
        rank=5,
        live=Live("send_lag", SEND_LAG_BUCKETS, "Open loop: actual send time minus intended send time."),
    ),
    # TTFT decomposed with the server's own per-request timing (present only where the server reports it)
    Metric(
        "ttft_queue",
        "TTFT part: queue (server)",
        "ms",
        "latency",
        lambda d: d.queue,
        frozenset(),
        2,
        optional=True,
        rank=7,
    ),
    Metric(
        "ttft_prefill",
        "TTFT part: prefill (server)",
        "ms",
        "latency",
        lambda d: d.prefill,
        frozenset(),
        2,
        optional=True,
        rank=8,
    ),
    # a histogram holds no negative values: a (mis-joined) negative rest is clamped here, raw in requests.jsonl
    Metric(
        "ttft_network",
        "TTFT part: network + HTTP",
        "ms",
        "latency",
        lambda d: None if d.network is None else max(0, d.network),
        frozenset(),
        2,
        optional=True,
        rank=9,
    ),
    Metric("tokens_per_chunk", "tokens per chunk", "", "count", lambda d: d.chunk_tokens, frozenset(), 2, rank=10),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
LATENCY_NAMES: tuple[str, ...] = tuple(m.name for m in METRICS if m.unit == "ms")
HIST_NAMES: tuple[str, ...] = tuple(m.name for m in METRICS)
LIVE: tuple[Metric, ...] = tuple(m for m in METRICS if m.live is not None)


def shown(place: str) -> tuple[Metric, ...]:
    """The metrics shown in `place`, in display order."""
    return tuple(sorted((m for m in METRICS if place in m.places), key=lambda m: m.rank))
