"""summary.json blocks about what the traffic did to the engine: each request's cache outcome, and
TTFT split with the server's own per-request timing (issue 28; harness.metrics.ttft_parts).

Written per class and per grouping (`per_class.<c>.cache`, `groups.turn.<k>.cache`,
`groups.endpoint.<e>.ttft_breakdown`, ...) by harness.metrics.recorder.ClassMetrics.summarize,
where there is something in them; the run-level `server_timing` block by harness.results.build.
Read by the report (harness.report.traffic) and the findings (harness.diagnose.ttft_parts).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.results.models.base import Block, Omit


class CacheOutcome(Block):
    """Prefix-cache outcome of a set of requests."""

    requests_reporting: int = 0  # requests whose usage carried prompt_tokens_details.cached_tokens
    prompt_tokens: int = 0  # their prompt tokens
    cached_tokens: int = 0  # of which the server said it served from its prefix cache
    hit_rate: float | None = None  # cached_tokens / prompt_tokens
    #: what a large-enough prefix cache could serve (sessions: the history; hash-block traces: the
    #: blocks seen before), over the requests that know it; None when the workload does not say
    ideal_cached_tokens: int | None = None
    ideal_hit_rate: float | None = None


class PartsMs(Block):
    """TTFT's parts (ms): send lag (open loop) + network (the rest: wire, HTTP, the server's
    frontend) + queue + prefill (as the server measured them) = the client's TTFT."""

    send_lag: float | None = None
    network: float | None = None
    queue: float | None = None
    prefill: float | None = None


class TtftTail(Block):
    """The parts over the requests of the TTFT tail (whole buckets from the top, >= 1% of them)."""

    requests: int = 0
    mean_ms: PartsMs = Field(default_factory=PartsMs)
    share: PartsMs = Field(default_factory=PartsMs)  # each part's sum over the TTFT sum (0..1)
    quantile: float = 0.99
    ttft_from_ms: float | None = None  # the tail: requests whose TTFT is at least this (bucket floor)


class SlowRequest(Block):
    id: str
    ttft_ms: float
    parts_ms: PartsMs


class TtftBreakdown(Block):
    """Where TTFT went, over every request the server timed (`requests`), and over the p99 tail.
    Only `requests` (0) and `partial` when no request could be split."""

    requests: int = 0
    mean_ms: Annotated[PartsMs, Omit] = Field(default_factory=PartsMs)
    share: Annotated[PartsMs, Omit] = Field(default_factory=PartsMs)  # each part's sum over the TTFT sum
    partial: int = 0  # requests the server timed without a queue time (llama.cpp): not split
    tail: Annotated[TtftTail | None, Omit] = None
    slowest: Annotated[list[SlowRequest], Omit] = Field(default_factory=list)


class ServerTiming(Block):
    """Run level: whether the server timed each request itself, and what could not be split."""

    requests: int = 0  # completed measured requests
    timed: int = 0  # of which the response carried the server's own timing
    sources: list[str] = Field(default_factory=list)  # harness.client.server_timing readers seen
    unknown: list[str] = Field(default_factory=list)  # TTFT parts no server reported
    note: str = ""  # how to get them, or what the joined parts cover


class BlockTraceReplay(Block):
    """A replayed trace of hashed prefix blocks (harness.workload.block_trace): the hit rate its
    block ids allow beside what the server and the engine measured (written by
    harness.results.trace_replay in runs with a block_trace class)."""

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


class AgentWaits(Block):
    """Seconds of the completed agentic sessions' parents, by what they waited on."""

    engine: float | None = None  # their own requests (send to last chunk)
    tools: float | None = None  # the tools' latencies
    think: float | None = None  # the user's think time between turns
    subagents: float | None = None  # a fan-out's fork to its join


class SubAgentWork(Block):
    engine: float = 0.0  # the sub-agents' own requests, summed (in parallel: may exceed the wall)
    tools: float = 0.0


class AgentSessions(Block):
    """Agentic sessions (harness.workload.agent; summary.json `sessions.agent`)."""

    sessions: int = 0  # ended (completed or cut)
    completed: int = 0
    calls_per_session: float = 0.0  # requests, sub-agents' included
    tool_calls: int = 0
    fan_outs: int = 0
    subagents: int = 0
    wall_s: float = 0.0  # the completed sessions' wall time, summed
    waiting_s: AgentWaits = Field(default_factory=AgentWaits)
    share: AgentWaits = Field(default_factory=AgentWaits)  # of wall_s (the rest: the client between calls)
    subagent_work_s: SubAgentWork = Field(default_factory=SubAgentWork)


class FleetBalance(Block):
    """How evenly a fleet's routing spread the load (summary.json `fleet.balance`), per replica in
    `fleet.endpoints` order."""

    requests: list[int] = Field(default_factory=list)  # completed
    prompt_tokens: list[int] = Field(default_factory=list)
    requests_max_over_mean: float | None = None  # the busiest replica over the mean: 1.0 is even
    prompt_tokens_max_over_mean: float | None = None
    ttft_p50_ms: list[float | None] = Field(default_factory=list)
    ttft_p99_ms: list[float | None] = Field(default_factory=list)
