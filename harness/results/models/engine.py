"""summary.json `engine`: the engine's own figures over the measured window (harness.telemetry).

Written by harness.telemetry.block: every key present and null where the engine does not expose it
(or telemetry could not read it). A run without telemetry in the web UI writes `{}`, so the block
is a Record: reading `{}` gives the defaults below and writes `{}` back.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.results.models.base import Block, Num, Omit, Record


class GaugeStats(Block):
    """A gauge sampled over the window (running and waiting requests)."""

    mean: float | None = None
    max: float | None = None


class KvUsage(Block):
    """KV-cache usage over the window, a share of the cache (0..1)."""

    mean: float | None = None
    p50: float | None = None
    p99: float | None = None
    max: float | None = None


class Preemptions(Block):
    count: int | None = None  # requests preempted in the window (counter increase)
    per_s: float | None = None


class PrefixCache(Block):
    queries: int | None = None  # prompt tokens looked up in the window
    hits: int | None = None
    hit_rate: float | None = None  # hits / queries
    expected_hit_rate: float | None = None  # what the workload's shared prefixes allow
    #: vLLM re-queries waiting requests: when lookups outnumber prompt tokens, hit_rate is cached /
    #: prompt tokens (`hit_rate_from`) and the lookup ratio stays beside it (harness.telemetry.block)
    hit_rate_from: Annotated[str | None, Omit] = None
    lookup_hit_rate: Annotated[float | None, Omit] = None
    lookups_per_prompt_token: Annotated[float | None, Omit] = None
    cached_prompt_tokens: Annotated[int | None, Omit] = None


class SpecDecode(Block):
    """Speculative decoding: counters (vLLM) or the mean of acceptance gauges (SGLang)."""

    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position: list[float] | None = None
    drafts: Annotated[int | None, Omit] = None
    draft_tokens: Annotated[int | None, Omit] = None
    accepted_tokens: Annotated[int | None, Omit] = None


class EngineLatency(Block):
    """An engine histogram over the window, in ms (quantiles interpolated inside its buckets). A
    quantile inside the first bucket (0 to its bound) is null: only "below the bound" is known,
    and `p50_bucket_ms` / `p99_bucket_ms` give that bound (audit D8)."""

    p50: float | None = None
    p99: float | None = None
    mean: float | None = None
    count: int | None = None
    p50_bucket_ms: Annotated[list[float | None] | None, Omit] = None  # [low, high] of the bucket
    p99_bucket_ms: Annotated[list[float | None] | None, Omit] = None


class GpuDevice(Record):
    """One device: NVML (index, name, uuid), DCGM via Prometheus (host, gpu label, uuid) or the
    simulated engine's modelled device (index, name)."""

    host: str | None = None
    index: int | str | None = None
    name: str | None = None
    uuid: str | None = None
    used_max_bytes: int | None = None
    total_bytes: int | None = None


class GpuProcess(Block):
    """A process that held GPU memory in the window (NVML)."""

    pid: int
    command: str
    used_max_bytes: int


class GpuMemory(Record):
    """GPU memory over the window: NVML, DCGM, the simulator's gauge, or why none (`reason`).

    A Record: the NVML writer puts per_gpu before samples, the simulator's after."""

    available: bool = False
    reason: str | None = None  # when not available
    source: str | None = None  # nvml | dcgm | simulated engine (...)
    simulated: bool | None = None
    used_max_bytes: int | None = None
    total_bytes: int | None = None
    per_gpu: list[GpuDevice] = Field(default_factory=list)
    samples: int | None = None
    driver: str | None = None
    memory_api: str | None = None
    utilization: float | None = None
    processes: list[GpuProcess] | None = None  # NVML: who held memory, most first
    note: str | None = None  # when more than one process held memory: used_max_bytes counts them all


class ScrapeMs(Block):
    mean: float
    max: float


class Telemetry(Block):
    """Where the figures came from and how complete they are."""

    source: str = "none"  # direct | prometheus | none
    scrapes: int = 0
    missing_reason: str | None = None  # why figures are missing or partial
    window_s: Annotated[float | None, Omit] = None  # the window the rates use
    scraped_span_s: Annotated[float | None, Omit] = None
    counter_resets: Annotated[int | None, Omit] = None
    interval_s: Annotated[float | None, Omit] = None
    failures: Annotated[int | None, Omit] = None
    scrape_ms: Annotated[ScrapeMs | None, Omit] = None
    page_bytes: Annotated[int | None, Omit] = None
    baseline_late: Annotated[bool | None, Omit] = None
    #: unix times the baseline and final scrapes were sent: the counters' window edges
    baseline_at: Annotated[float | None, Omit] = None
    final_at: Annotated[float | None, Omit] = None
    prometheus_interval_s: Annotated[Num | None, Omit] = None


class StepLag(Block):
    mean: float | None = None
    p50: float | None = None
    p99: float | None = None
    p99_bucket_ms: list[float | None] | None = None


class SimulatorLag(Block):
    """How far the simulated engine fell behind its own schedule over the window (harness.telemetry.block)."""

    behind_s: float  # time its schedule slipped for good
    modelled_s: float  # the step time its cost model asked for
    behind_share: float | None = None  # behind / (behind + modelled)
    steps: int = 0
    mean_step_ms: float | None = None
    step_lag_ms: StepLag = Field(default_factory=StepLag)  # how late each step's tokens went out


class EngineBlock(Record):
    """summary.json `engine` (module doc). Rates use the client's measured window."""

    profile: str | None = None  # the telemetry profile that read /metrics (vllm, sglang, sim, ...)
    kv_usage: KvUsage = Field(default_factory=KvUsage)
    kv_capacity_tokens: int | None = None
    block_size: int | None = None
    kv_cache_memory_bytes: int | None = None  # vLLM --kv-cache-memory-bytes: the size set, not profiled
    preemptions: Preemptions = Field(default_factory=Preemptions)
    prefix_cache: PrefixCache = Field(default_factory=PrefixCache)
    running: GaugeStats = Field(default_factory=GaugeStats)
    waiting: GaugeStats = Field(default_factory=GaugeStats)
    prompt_tokens: int | None = None  # counter increases over the window
    generation_tokens: int | None = None
    spec_decode: SpecDecode | None = None
    gpu_memory: GpuMemory = Field(default_factory=GpuMemory)
    #: ttft, itl, e2e, queue, prefill, decode (harness.telemetry.block.LATENCIES)
    engine_latency_ms: dict[str, EngineLatency] = Field(default_factory=dict)
    telemetry: Telemetry = Field(default_factory=Telemetry)
    simulator: SimulatorLag | None = None  # the simulated engine only
