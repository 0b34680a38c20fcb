"""The run directory contract: what `summary.json` holds, typed.

Other parts (report, compare, sweep, the GitHub workflow) and users' scripts read these files,
so fields are only ever added; `schema_version` changes when a meaning changes.

Run directory layout (see harness.results.layout):
  scenario.yaml        resolved scenario (overrides applied, seed fixed)
  summary.json         RunSummary below
  histograms.json      lossless histograms per class and `_all`: {"<class>": {"hist": {"<metric>":
                       {"hdr": "<base64 HDR V2>", "sum", "min", "max", "clamped_low",
                       "clamped_high", "range"}}, "counts": {...}, "errors": {...}}}
                       (latencies in integer ns; tokens_per_chunk in tokens)
  requests.jsonl       one line per request, appended as each finishes
  engine_metrics.jsonl telemetry time series, one scrape per line
  progress.jsonl       the load process's periodic progress lines
  timeslices.json      per-interval figures (harness.diagnose.timeslices)
  interference.json    ITL spikes and long-prefill intervals, for the report's time plot
  load.log, sim.log    logs of the load process and simulated engine
  report.md/.html      written by `harness report`
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.metrics.table import LATENCY_NAMES
from harness.results.schema_traffic import BlockTraceReplay, CacheOutcome, ServerTiming, TtftBreakdown

SCHEMA_VERSION = 1

#: latency blocks in `latency_ms`, in the metric table's storage order (harness.metrics.table)
LATENCY_METRICS: tuple[str, ...] = LATENCY_NAMES


class Open(BaseModel):
    """Summary blocks accept extra keys: newer writers may add fields older readers ignore."""

    model_config = ConfigDict(extra="allow")


class Dist(Open):
    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    min: float | None = None


class RequestsBlock(Open):
    completed: int = 0
    failed: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    rps: float = 0.0


class TokensBlock(Open):
    input_total: int = 0
    output_total: int = 0
    input_per_s: float = 0.0
    output_per_s: float = 0.0
    output_count_source: dict[str, int] = Field(default_factory=dict)  # usage / tokenizer


class ClassBlock(Open):
    requests: RequestsBlock = Field(default_factory=RequestsBlock)
    tokens: TokensBlock = Field(default_factory=TokensBlock)
    latency_ms: dict[str, Dist] = Field(default_factory=dict)
    tokens_per_chunk: Dist = Field(default_factory=Dist)
    goodput: dict[str, Any] = Field(default_factory=dict)
    cache: CacheOutcome | None = None  # prefix-cache outcome (servers that report cached tokens)
    ttft_breakdown: TtftBreakdown | None = None  # TTFT split with the server's own timing


class Finding(Open):
    """One diagnosis: what the run's figures say, with the number and the guide's advice.

    Written by harness.diagnose.findings (most severe first in `RunSummary.findings`); `harness
    tune` and users' scripts read them: `id` is stable, `knobs` names the engine settings the advice
    turns (snake_case, as sweep flags), `value` holds the numbers behind `text`.
    """

    id: str
    severity: float  # 0..1, for ranking
    title: str
    text: str  # the finding with its number: "KV usage max 0.99 with 31 preemptions"
    advice: str = ""  # the guide's advice that applies
    guide: str = ""  # where the advice comes from
    value: dict[str, Any] = Field(default_factory=dict)
    knobs: list[str] = Field(default_factory=list)


class RunSummary(Open):
    schema_version: int = SCHEMA_VERSION
    harness_version: str = ""
    scenario: dict[str, Any] = Field(default_factory=dict)  # name, fingerprint{value, parts}, path
    target: dict[str, Any] = Field(default_factory=dict)  # url, api, model (never secrets)
    window: dict[str, Any] = Field(default_factory=dict)  # start, end (unix s), duration_s, warmup_s
    load: dict[str, Any] = Field(default_factory=dict)  # mode, concurrency/rate, achieved rate
    requests: RequestsBlock = Field(default_factory=RequestsBlock)
    tokens: TokensBlock = Field(default_factory=TokensBlock)
    latency_ms: dict[str, Dist] = Field(default_factory=dict)
    tokens_per_chunk: Dist = Field(default_factory=Dist)
    per_class: dict[str, ClassBlock] = Field(default_factory=dict)
    cache: CacheOutcome | None = None  # every class together (harness.results.schema_traffic)
    ttft_breakdown: TtftBreakdown | None = None
    server_timing: ServerTiming | None = None  # whether the server timed each request, what is unknown
    block_trace: BlockTraceReplay | None = None  # a replayed hash-block trace: ideal vs measured hit rate
    # extra keys written only when there is something in them (older readers see no change):
    #   groups    the same requests grouped another way: {"turn": {"1": <ClassBlock>, ...}}
    #   sessions  multi-turn sessions: started/completed/cut, duration_s, ideal vs engine prefix hit rate
    goodput: dict[str, Any] = Field(default_factory=dict)  # overall{good, rps, fraction}, per_class
    usage_check: dict[str, Any] = Field(default_factory=dict)
    timing: dict[str, Any] = Field(default_factory=dict)  # clock, coalesced_reads, stalls
    client: dict[str, Any] = Field(default_factory=dict)  # cpu_max_pct, cpu_mean_pct, processes
    engine: dict[str, Any] = Field(default_factory=dict)  # telemetry block (harness.telemetry)
    validity: dict[str, Any] = Field(default_factory=dict)  # ok, warnings[]
    #: post-run analyses (harness.diagnose): engine_log, interference, memory, timeslices
    diagnosis: dict[str, Any] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)  # most severe first
    status: str = "complete"  # complete | partial | failed
    status_reason: str | None = None  # why not complete: "engine exited ...", "stopped early: ...", "terminated"
