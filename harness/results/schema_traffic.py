"""summary.json blocks about what the traffic did to the engine: each request's cache outcome,
and TTFT split with the server's own per-request timing.

Written per class and per grouping (`per_class.<c>.cache`, `groups.turn.<k>.cache`,
`groups.endpoint.<e>.ttft_breakdown`, ...) by harness.metrics.recorder.ClassMetrics.summarize;
the run-level `server_timing` block by harness.results.build. Read by the report
(harness.report.traffic) and the findings (harness.diagnose.ttft_parts).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    """As every summary block: newer writers may add keys older readers ignore."""

    model_config = ConfigDict(extra="allow")


class CacheOutcome(_Open):
    """Prefix-cache outcome of a set of requests."""

    requests_reporting: int = 0  # requests whose usage carried prompt_tokens_details.cached_tokens
    prompt_tokens: int = 0  # their prompt tokens
    cached_tokens: int = 0  # of which the server said it served from its prefix cache
    hit_rate: float | None = None  # cached_tokens / prompt_tokens
    #: what a large-enough prefix cache could serve (sessions: the history; hash-block traces: the
    #: blocks seen before), over the requests that know it; None when the workload does not say
    ideal_cached_tokens: int | None = None
    ideal_hit_rate: float | None = None


class PartsMs(_Open):
    """TTFT's parts (ms): send lag (open loop) + network (the rest: wire, HTTP, the server's
    frontend) + queue + prefill (as the server measured them) = the client's TTFT."""

    send_lag: float | None = None
    network: float | None = None
    queue: float | None = None
    prefill: float | None = None


class PartsBlock(_Open):
    requests: int = 0
    mean_ms: PartsMs = Field(default_factory=PartsMs)
    share: PartsMs = Field(default_factory=PartsMs)  # each part's sum over the TTFT sum (0..1)


class TtftTail(PartsBlock):
    quantile: float = 0.99
    ttft_from_ms: float | None = None  # the tail: requests whose TTFT is at least this (bucket floor)


class SlowRequest(_Open):
    id: str
    ttft_ms: float
    parts_ms: PartsMs


class TtftBreakdown(PartsBlock):
    """Where TTFT went, over every request the server timed (`requests`), and over the p99 tail."""

    partial: int = 0  # requests the server timed without a queue time (llama.cpp): not split
    tail: TtftTail | None = None
    slowest: list[SlowRequest] = Field(default_factory=list)


class ServerTiming(_Open):
    """Run level: whether the server timed each request itself, and what could not be split."""

    requests: int = 0  # completed measured requests
    timed: int = 0  # of which the response carried the server's own timing
    sources: list[str] = Field(default_factory=list)  # harness.client.server_timing readers seen
    unknown: list[str] = Field(default_factory=list)  # TTFT parts no server reported
    note: str = ""  # how to get them, or what the joined parts cover


class BlockTraceReplay(_Open):
    """A replayed trace of hashed prefix blocks (harness.workload.block_trace): the hit rate its
    block ids allow beside what the server and the engine measured."""

    path: str
    content_id: str
    records: int
    sessions: int
    block_tokens: int  # tokens per hash id
    engine_block: int  # the block size the ideal is cut to (block_trace.engine_block)
    engine_block_size: int | None = None  # the engine's own, from its telemetry (when it says)
    trace_rate: float | None = None  # sessions per second at the trace's own pace
    ideal_hit_rate_trace: float | None = None  # the whole trace, once through
    requests: int = 0  # measured requests that completed
    ideal_hit_rate: float | None = None  # over those requests
    server_hit_rate: float | None = None  # usage.prompt_tokens_details.cached_tokens over those requests
    engine_hit_rate: float | None = None  # the engine's prefix-cache counters over the window
