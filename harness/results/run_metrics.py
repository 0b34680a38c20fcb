"""The table of run-level figures: one entry per number a run yields once (not a distribution),
everything that compares runs iterates it.

Each entry says what the figure is called (its key in index.json `metrics`, summary.csv and
tune.json `tried`), its label and unit, where it comes from (`source`: the path in the typed
summary, harness.results.models.summary; `get` reads it), how two runs compare on it (`better`:
higher, lower, or None for a figure that describes the load or the state rather than a result),
and where it is used. The per-request distributions (TTFT, ITL, ...) have their own table,
harness.metrics.table; their sweep columns (`<short>_<stat>_ms`) come first in `sweep_metrics`.

Adding a figure is one entry here plus its case in tests/results/test_run_metrics.py (and, for
"sweep", its field in harness.results.models.sweep.CellMetrics, in the same order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from harness.metrics.table import Metric, shown
from harness.results.models.diagnosis import AnalysisError
from harness.results.models.summary import Dist, RunSummary
from harness.results.models.sweep import CellMetrics

#: where a figure is used: sweep: index.json cell metrics (harness.sweep.results); csv: a column of
#: the sweep's summary.csv; tune: tune.json `tried` rows (harness.tune.measure)
Place = Literal["sweep", "csv", "tune"]
GIB = 2**30


@dataclass(frozen=True)
class RunMetric:
    name: str  # the key in index.json metrics / summary.csv / tune.json tried
    label: str
    unit: str
    source: str  # the path in summary.json it is read from (for people; `get` is the reader)
    get: Callable[[RunSummary], float | None]
    better: Literal["higher", "lower"] | None  # None: it describes the load or the engine's state
    places: frozenset[Place] = frozenset()
    #: written only by the runs that have it (speculative decoding's figures), so index.json of
    #: every other run keeps its keys
    only_when_set: bool = False


def _num(v: float | int | None) -> float | None:
    return None if v is None else float(v)


def _gib(n: float | int | None) -> float | None:
    return float(n) / GIB if n is not None and n > 0 else None


def _recompilations(s: RunSummary) -> float | None:
    """Recompilations in the window's log; 0 when the log was read and had none, None without a log."""
    log = s.diagnosis.engine_log
    if log is None:
        return None
    if isinstance(log, AnalysisError):
        return 0
    event = log.events.get("recompilation")
    return event.count if event is not None else 0


def _interference_p99(s: RunSummary, side: Literal["inside", "outside"]) -> float | None:
    block = s.diagnosis.interference
    if block is None or isinstance(block, AnalysisError):
        return None
    gaps = block.inside if side == "inside" else block.outside
    return gaps.p99_ms if gaps is not None else None


def _memory_growth(s: RunSummary) -> float | None:
    m = s.diagnosis.memory
    return None if m is None or isinstance(m, AnalysisError) else m.growth_gib


_SWEEP: frozenset[Place] = frozenset({"sweep"})
_CSV: frozenset[Place] = frozenset({"sweep", "csv"})
_BOTH: frozenset[Place] = frozenset({"sweep", "tune"})
_ALL: frozenset[Place] = frozenset({"sweep", "csv", "tune"})
_TUNE: frozenset[Place] = frozenset({"tune"})

#: the table, in the order of index.json's cell metrics (after the latency columns)
RUN_METRICS: tuple[RunMetric, ...] = (
    RunMetric("req_per_s", "requests/s", "req/s", "requests.rps", lambda s: s.requests.rps, "higher", _ALL),
    RunMetric(
        "output_tok_per_s",
        "output tokens/s",
        "tok/s",
        "tokens.output_per_s",
        lambda s: s.tokens.output_per_s,
        "higher",
        _ALL,
    ),
    RunMetric(
        "input_tok_per_s",
        "input tokens/s",
        "tok/s",
        "tokens.input_per_s",
        lambda s: s.tokens.input_per_s,
        "higher",
        _ALL,
    ),
    RunMetric(
        "goodput_req_per_s",
        "goodput (requests/s within every SLO)",
        "req/s",
        "goodput.overall.rps",
        lambda s: s.goodput.overall.rps,
        "higher",
        _ALL,
    ),
    RunMetric(
        "goodput_fraction",
        "share of requests within every SLO",
        "",
        "goodput.overall.fraction",
        lambda s: s.goodput.overall.fraction,
        "higher",
        _ALL,
    ),
    RunMetric(
        "kv_usage_max", "KV-cache usage, max", "", "engine.kv_usage.max", lambda s: s.engine.kv_usage.max, None, _ALL
    ),
    RunMetric(
        "preemptions",
        "preemptions",
        "",
        "engine.preemptions.count",
        lambda s: _num(s.engine.preemptions.count),
        "lower",
        _ALL,
    ),
    RunMetric(
        "prefix_hit_rate",
        "prefix-cache hit rate (engine)",
        "",
        "engine.prefix_cache.hit_rate",
        lambda s: s.engine.prefix_cache.hit_rate,
        "higher",
        _ALL,
    ),
    RunMetric("completed", "completed requests", "", "requests.completed", lambda s: s.requests.completed, None, _CSV),
    RunMetric("failed", "failed requests", "", "requests.failed", lambda s: s.requests.failed, "lower", _CSV),
    RunMetric(
        "client_concurrency",
        "client users (closed loop)",
        "users",
        "load.concurrency",
        lambda s: s.load.concurrency,
        None,
        _CSV,
    ),
    RunMetric(
        "client_rate", "client request rate (open loop)", "req/s", "load.rate", lambda s: s.load.rate, None, _CSV
    ),
    RunMetric(
        "gpu_memory_used_max_gib",
        "GPU memory used, max",
        "GiB",
        "engine.gpu_memory.used_max_bytes",
        lambda s: _gib(s.engine.gpu_memory.used_max_bytes),
        "lower",
        _CSV,
    ),
    # guide 000's speculation values: a sweep shows them beside the ranking (below 50%: not ranked)
    RunMetric(
        "spec_acceptance_rate",
        "speculative tokens accepted",
        "",
        "engine.spec_decode.acceptance_rate",
        lambda s: s.engine.spec_decode.acceptance_rate if s.engine.spec_decode else None,
        "higher",
        _ALL,
        True,
    ),
    RunMetric(
        "spec_mean_acceptance_length",
        "tokens per speculative step",
        "tokens",
        "engine.spec_decode.mean_acceptance_length",
        lambda s: s.engine.spec_decode.mean_acceptance_length if s.engine.spec_decode else None,
        "higher",
        _ALL,
        True,
    ),
    RunMetric(
        "itl_p99_inside_prefill_ms",
        "ITL p99 while a long prefill runs",
        "ms",
        "diagnosis.interference.inside.p99_ms",
        lambda s: _interference_p99(s, "inside"),
        "lower",
        _BOTH,
    ),
    RunMetric(
        "itl_p99_outside_prefill_ms",
        "ITL p99 outside long prefills",
        "ms",
        "diagnosis.interference.outside.p99_ms",
        lambda s: _interference_p99(s, "outside"),
        "lower",
        _SWEEP,
    ),
    RunMetric(
        "recompilations",
        "recompilations in the engine log",
        "",
        "diagnosis.engine_log.events.recompilation.count",
        _recompilations,
        "lower",
        _BOTH,
    ),
    RunMetric(
        "memory_growth_gib",
        "GPU memory growth over the window",
        "GiB",
        "diagnosis.memory.growth_gib",
        _memory_growth,
        "lower",
        _SWEEP,
    ),
    # read from the cells' summary.json by the tune steps (not in index.json)
    RunMetric(
        "kv_usage_mean",
        "KV-cache usage, mean",
        "",
        "engine.kv_usage.mean",
        lambda s: s.engine.kv_usage.mean,
        None,
        _TUNE,
    ),
    RunMetric(
        "gpu_memory_used_max_bytes",
        "GPU memory used, max",
        "bytes",
        "engine.gpu_memory.used_max_bytes",
        lambda s: _num(s.engine.gpu_memory.used_max_bytes),
        "lower",
        _TUNE,
    ),
    # not in any file yet: for reports and scripts
    RunMetric(
        "cache_hit_rate",
        "prefix-cache hit rate (server usage)",
        "",
        "cache.hit_rate",
        lambda s: s.cache.hit_rate if s.cache else None,
        "higher",
    ),
    RunMetric(
        "error_rate",
        "failed requests",
        "%",
        "requests.failed / (completed + failed)",
        lambda s: 100.0 * s.requests.failed / t if (t := s.requests.completed + s.requests.failed) else None,
        "lower",
    ),
    RunMetric(
        "sim_behind_share",
        "simulated engine behind its schedule",
        "",
        "engine.simulator.behind_share",
        lambda s: s.engine.simulator.behind_share if s.engine.simulator else None,
        "lower",
    ),
)

BY_NAME: dict[str, RunMetric] = {m.name: m for m in RUN_METRICS}


def used_in(place: Place) -> tuple[RunMetric, ...]:
    return tuple(m for m in RUN_METRICS if place in m.places)


# ---------------------------------------------------------------- a run's sweep metrics
#: latency columns of the sweep: the metric table's "sweep" entries, p50 and p99 each
SWEEP_STATS = ("p50", "p99")
LATENCY_COLUMNS: tuple[str, ...] = tuple(f"{m.short}_{q}_ms" for m in shown("sweep") for q in SWEEP_STATS)


def _latency(s: RunSummary, m: Metric, stat: str) -> float | None:
    """The metric's statistic, or its fallback's where it has no samples (ITL per chunk without token counts)."""
    name = m.fallback if m.fallback and not (s.latency_ms.get(m.name) or Dist()).count else m.name
    d = s.latency_ms.get(name)
    return None if d is None else getattr(d, stat)


def _finding(s: RunSummary) -> tuple[bool | None, str | None, str | None]:
    ts = s.diagnosis.timeslices
    drift = None if ts is None or isinstance(ts, AnalysisError) else ts.steady_state.drift
    top = s.findings[0] if s.findings else None
    return (drift, f"{top.text}: {top.advice}" if top else None, ",".join(f.id for f in s.findings) or None)


def sweep_metrics(s: RunSummary) -> CellMetrics:
    """The index.json / summary.csv figures of one run: the latency columns, the table's "sweep"
    entries, the steady-state drift and the findings."""
    drift, finding, ids = _finding(s)
    values: dict[str, object] = {f"{m.short}_{q}_ms": _latency(s, m, q) for m in shown("sweep") for q in SWEEP_STATS}
    values.update({m.name: v for m in used_in("sweep") if (v := m.get(s)) is not None or not m.only_when_set})
    values.update(drift=drift, finding=finding, finding_ids=ids)
    return CellMetrics.model_validate(values)
