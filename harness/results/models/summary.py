"""summary.json, typed: `RunSummary` and the blocks it holds, in the file's key order.

Writers: harness.results.build (the client's figures), harness.telemetry (`engine`),
harness.diagnose (`diagnosis`, `findings`), harness.run.finish (the checks every run gets). Read
a run with `harness.results.read.load_run(path)`.

Fields are only ever added; `SCHEMA_VERSION` changes when a meaning changes. A field that only
some runs have is marked `Omit` (left out of the file unless set), so older directories keep
their bytes when read and written back (tests/results/test_golden.py).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.results.models.base import Block, Num, Omit, Record
from harness.results.models.diagnosis import Diagnosis, Finding
from harness.results.models.engine import EngineBlock, GaugeStats, KvUsage
from harness.results.models.traffic import (
    AgentSessions,
    BlockTraceReplay,
    CacheOutcome,
    FleetBalance,
    ServerTiming,
    TtftBreakdown,
)

SCHEMA_VERSION = 1


class Clamped(Block):
    """Samples outside the histogram's range, counted rather than dropped (harness.metrics.hdr)."""

    low: int
    high: int


class Quantiles(Block):
    """count, mean and percentiles of one metric over the window (ms for latencies; tokens for
    tokens_per_chunk); `Dist` and `Spread` add min and max, each in the order its writer uses."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p999: float | None = None


class Dist(Quantiles):
    """A distribution of the overall and per-class blocks (max before min, as they were always written)."""

    max: float | None = None
    min: float | None = None
    clamped: Annotated[Clamped | None, Omit] = None


class Spread(Quantiles):
    """The same figures in the histogram's own order (min before max): groups and sessions."""

    min: float | None = None
    max: float | None = None
    clamped: Annotated[Clamped | None, Omit] = None


class RequestsBlock(Block):
    completed: int = 0
    failed: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    rps: float = 0.0  # completed requests per second of the window


class TokensBlock(Block):
    input_total: int = 0
    output_total: int = 0
    input_per_s: float = 0.0
    output_per_s: float = 0.0
    output_count_source: dict[str, int] = Field(default_factory=dict)  # usage / tokenizer: requests counted each way
    #: prompt tokens the server said it served from its prefix cache (usage.prompt_tokens_details)
    cached_input_total: Annotated[int | None, Omit] = None


class Goodput(Block):
    """Requests that met every SLO of their class (harness.metrics.recorder.meets_slo)."""

    good: int = 0
    total: int = 0
    fraction: float | None = None  # good / total; None without requests
    rps: float = 0.0  # good requests per second of the window


class ClassBlock(Block):
    """The client's figures of one class of requests (or one value of a grouping)."""

    requests: RequestsBlock = Field(default_factory=RequestsBlock)
    tokens: TokensBlock = Field(default_factory=TokensBlock)
    latency_ms: dict[str, Dist] = Field(default_factory=dict)  # harness.metrics.table LATENCY_NAMES
    tokens_per_chunk: Dist = Field(default_factory=Dist)
    goodput: Goodput = Field(default_factory=Goodput)
    #: prefix-cache outcome (servers that report cached tokens; workloads that know the ideal)
    cache: Annotated[CacheOutcome | None, Omit] = None
    ttft_breakdown: Annotated[TtftBreakdown | None, Omit] = None  # TTFT split with the server's own timing


class GroupBlock(Block):
    """A class block's figures for one value of a grouping (turn, endpoint, adapter, stage)."""

    requests: RequestsBlock = Field(default_factory=RequestsBlock)
    tokens: TokensBlock = Field(default_factory=TokensBlock)
    latency_ms: dict[str, Spread] = Field(default_factory=dict)
    tokens_per_chunk: Spread = Field(default_factory=Spread)
    goodput: Goodput = Field(default_factory=Goodput)
    cache: Annotated[CacheOutcome | None, Omit] = None
    ttft_breakdown: Annotated[TtftBreakdown | None, Omit] = None


class GoodputBlock(Block):
    overall: Goodput = Field(default_factory=Goodput)
    per_class: dict[str, Goodput] = Field(default_factory=dict)


class Fingerprint(Block):
    """What makes two runs comparable (harness.workload.fingerprint): a hash per part."""

    value: str = ""
    parts: dict[str, str] = Field(default_factory=dict)


class ScenarioInfo(Block):
    name: str = ""
    fingerprint: Fingerprint = Field(default_factory=Fingerprint)
    path: str | None = None
    seed: int | None = None
    #: an SLO was set (goodput means something); absent from runs written before it existed: read as set
    slo_set: Annotated[bool, Omit] = True


class TargetInfo(Block):
    """What was measured (never secrets)."""

    url: str | None = None
    api: str | None = None
    model: str | None = None
    engine_kind: str | None = None
    simulated: bool = False
    continuous_usage: bool | None = None  # the server sent usage with every chunk
    labels: dict[str, str] = Field(default_factory=dict)


class Window(Block):
    """The measured window, unix seconds; warmup before it, drain (the last requests ending) inside."""

    start: float | None = None
    end: float | None = None
    duration_s: float = 0.0
    warmup_s: float = 0.0
    drain_s: Annotated[float, Omit] = 0.0  # (absent from runs written before it existed)


class TraceInfo(Block):
    """An open-loop trace's inputs (harness.workload.arrivals.trace)."""

    path: str
    field: str = "timestamp"
    unit: str = "s"


class Stage(Block):
    """One stage of a Locust LoadTestShape (web UI): its users and seconds inside the window."""

    stage: str
    users: int
    duration_s: float


class OfflineFacts(Block):
    """An offline throughput run's batch figures (harness.results.offline)."""

    requests: int
    makespan_s: float
    req_per_s: float | None = None
    input_tok_per_s: float | None = None
    output_tok_per_s: float | None = None
    submit_spread_s: float | None = None
    peak_in_flight: int = 0
    latency_label: str = ""
    client_limited: str | None = None  # why the client was the limit, when it was


class LoadInfo(Block):
    """What the scenario asked of the load (harness.run.finish.load_block) and how it ended."""

    mode: str = "closed"  # closed | open | offline
    duration_s: float | None = None
    requests: int | None = None
    ramp_s: float = 0.0
    concurrency: Annotated[int | None, Omit] = None  # closed loop and offline
    rate: Annotated[float | None, Omit] = None  # open loop
    arrival: Annotated[str | None, Omit] = None
    burstiness: Annotated[float | None, Omit] = None
    max_in_flight: Annotated[int | None, Omit] = None
    trace: Annotated[TraceInfo | None, Omit] = None
    until_stopped: Annotated[bool | None, Omit] = None  # web UI: ran until stopped by hand
    stages: Annotated[list[Stage] | None, Omit] = None
    stopped_early: Annotated[str | None, Omit] = None  # why a watcher stopped the run
    offline: Annotated[OfflineFacts | None, Omit] = None


class UsageCheck(Block):
    """The server's usage counts against the harness's intended prompt lengths."""

    requests_with_usage: int = 0
    prompt_tokens_mean_diff: float | None = None  # server minus intended, mean per request
    max_diff: Num | None = None
    output_tokenizer_disagreements: int = 0
    tokenizer: str | None = None
    # server - intended = offset + scale_error * intended + residual (harness.metrics.prompt_fit):
    # the offset is the chat template's constant (tolerated); `prompt_tokens_mismatch` lists what
    # goes beyond it (empty: the counts agree). Absent in runs before the fit.
    prompt_tokens_offset: Annotated[float | None, Omit] = None
    prompt_tokens_scale_error: Annotated[float | None, Omit] = None
    prompt_tokens_residual_rms: Annotated[float | None, Omit] = None
    prompt_tokens_mismatch: Annotated[list[str] | None, Omit] = None


class StallMeter(Record):
    """Host stalls inside the window (harness.metrics.stall_meter); `{}` when the meter wrote nothing."""

    threshold_ms: float | None = None
    stalls_in_window: int = 0
    max_stall_ms: float = 0.0
    stall_times: list[float] = Field(default_factory=list)
    wakeup_late_p99_ms: float | None = None
    wakeup_late_max_ms: float | None = None


class GcPolicy(Block):
    """One load process's garbage-collection policy and its pauses."""

    policy: str
    collections: int
    max_pause_ms: float
    total_pause_ms: float


class Timing(Block):
    clock: str = "kernel"  # kernel | user: where reads were stamped
    requests_by_clock: dict[str, int] = Field(default_factory=dict)
    coalesced_reads: int = 0  # reads that held several SSE events (one stamp for them)
    stall_meter: StallMeter = Field(default_factory=StallMeter)
    gc: list[GcPolicy] = Field(default_factory=list)


class ClientInfo(Block):
    """The load processes: CPU (a saturated client measures itself), sends, cuts, backoffs."""

    processes: int = 1
    cpu_max_pct: float | None = None
    cpu_mean_pct: float | None = None
    sent: int = 0
    cut_at_end: int = 0
    warmup_requests: int = 0
    #: (the three below are absent from runs written before they existed)
    backoffs: Annotated[int, Omit] = 0  # 429/503 answers the client backed off from
    backoff_s: Annotated[float, Omit] = 0.0
    error_lines_suppressed: Annotated[dict[str, int], Omit] = Field(default_factory=dict)
    #: (absent before the native reader existed) the stream reader the load processes ran:
    #: native (harness/client/_native.c), python (the fallback), or native+python when they differed
    reader: Annotated[str, Omit] = ""
    rss_peak_mib: Annotated[float, Omit] = 0.0  # the largest load process's peak RSS
    finish_backlog_max: Annotated[int, Omit] = 0  # most finished responses waiting to be interpreted
    cpu_s: Annotated[float, Omit] = 0.0  # the load processes' CPU seconds over the window, summed
    cpu_sys_s: Annotated[float, Omit] = 0.0  # of which in the kernel (reads, sends, epoll)
    cpu_us_per_output_token: Annotated[float | None, Omit] = None  # cpu_s per output token, µs
    lost_workers: Annotated[list[int], Omit] = Field(default_factory=list)  # distributed workers lost mid-run


class Validity(Block):
    ok: bool = True
    warnings: list[str] = Field(default_factory=list)  # each says why the numbers may mislead


class ReplicaFigures(Block):
    """One replica of a fleet over the window (harness.telemetry.fleet.per_replica)."""

    endpoint: str
    waiting: GaugeStats | None = None
    running: GaugeStats | None = None
    kv_usage: KvUsage | None = None
    prefix_hit_rate: float | None = None
    preemptions: int | None = None
    gpu_utilization: float | None = None
    missing_reason: str | None = None


class Fleet(Block):
    """Several replicas behind the client's routing (target.endpoints)."""

    endpoints: list[str] = Field(default_factory=list)
    routing: str = ""
    sent: list[int] = Field(default_factory=list)  # requests sent to each endpoint
    prefix_blocks: int = 0
    on_several_endpoints: int = 0
    prefix_overlap: float | None = None  # share of prefix blocks sent to more than one replica
    overlap_processes: int = 1
    usage_cached_hit_rate: dict[str, float] | None = None  # per endpoint, from the server's usage
    #: requests, prompt tokens and TTFT per replica, and the busiest over the mean (absent from older runs)
    balance: Annotated[FleetBalance | None, Omit] = None
    fleet_usage_cached_hit_rate: float | None = None
    engines: Annotated[list[ReplicaFigures] | None, Omit] = None


class Sessions(Block):
    """Multi-turn sessions of the window and the prefix cache they allow."""

    started: int = 0
    completed: int = 0
    cut: int = 0  # ended by the window's end or a failed turn
    turns: int = 0
    turns_per_ended_session: float | None = None
    duration_s: Spread = Field(default_factory=Spread)
    prompt_tokens: int = 0
    ideal_cached_tokens: int = 0
    ideal_prefix_hit_rate: float | None = None  # what a large-enough prefix cache would hit
    usage_cached_hit_rate: float | None = None
    agent: Annotated[AgentSessions | None, Omit] = None  # agentic sessions: calls, fan-outs, where the wall time went
    engine_prefix_hit_rate: Annotated[float | None, Omit] = None  # the engine's own, over the window


class PrefixCacheIsolation(Block):
    """How the run kept an earlier run's prefix cache from serving it (harness.run.prefix_cache)."""

    mode: str  # reset | salt | off
    reset_path: str | None = None
    prompt_salt: int | None = None  # workload.prompt_salt: other words at the same lengths
    reason: str | None = None


class RunSummary(Block):
    """summary.json (module doc). Blocks below `status_reason` appear only in runs that have them."""

    schema_version: int = SCHEMA_VERSION
    harness_version: str = ""
    scenario: ScenarioInfo = Field(default_factory=ScenarioInfo)
    target: TargetInfo = Field(default_factory=TargetInfo)
    window: Window = Field(default_factory=Window)
    load: LoadInfo = Field(default_factory=LoadInfo)
    requests: RequestsBlock = Field(default_factory=RequestsBlock)
    tokens: TokensBlock = Field(default_factory=TokensBlock)
    latency_ms: dict[str, Dist] = Field(default_factory=dict)
    tokens_per_chunk: Dist = Field(default_factory=Dist)
    per_class: dict[str, ClassBlock] = Field(default_factory=dict)
    #: every class together (harness.results.models.traffic); the writer always sets the three
    #: (absent from runs written before they existed)
    cache: Annotated[CacheOutcome | None, Omit] = None
    ttft_breakdown: Annotated[TtftBreakdown | None, Omit] = None
    server_timing: Annotated[ServerTiming | None, Omit] = None  # whether the server timed each request
    #: a replayed hash-block trace: the ideal hit rate beside the server's and the engine's
    block_trace: Annotated[BlockTraceReplay | None, Omit] = None
    goodput: GoodputBlock = Field(default_factory=GoodputBlock)
    usage_check: UsageCheck = Field(default_factory=UsageCheck)
    timing: Timing = Field(default_factory=Timing)
    client: ClientInfo = Field(default_factory=ClientInfo)
    engine: EngineBlock = Field(default_factory=EngineBlock)
    validity: Validity = Field(default_factory=Validity)
    #: post-run analyses (harness.diagnose): engine_log, interference, memory, timeslices
    #: (both absent from runs written before the analyses existed)
    diagnosis: Annotated[Diagnosis, Omit] = Field(default_factory=Diagnosis)
    findings: Annotated[list[Finding], Omit] = Field(default_factory=list)  # most severe first
    status: str = "complete"  # complete | partial | failed
    #: why not complete: "engine exited ...", "stopped early: ...", "terminated" (the writer always sets
    #: it, null when complete; absent from runs written before it existed)
    status_reason: Annotated[str | None, Omit] = None
    #: the same requests grouped another way: {"turn": {"1": <ClassBlock>, ...}, "endpoint": ..., "stage": ...}
    groups: Annotated[dict[str, dict[str, GroupBlock]] | None, Omit] = None
    fleet: Annotated[Fleet | None, Omit] = None
    sessions: Annotated[Sessions | None, Omit] = None
    prefix_cache_isolation: Annotated[PrefixCacheIsolation | None, Omit] = None
