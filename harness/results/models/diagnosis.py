"""summary.json `diagnosis` and `findings`: the post-run analyses (harness.diagnose).

Each analysis writes one block, or `{"error": ...}` when it failed (the run keeps its other
blocks); the findings rules turn the blocks into ranked findings with the guides' advice.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.results.models.base import Block, Num, Omit, Scalar


class AnalysisError(Block):
    """An analysis that raised: its block is only the error (harness.diagnose never loses a run)."""

    error: str


class LogEvent(Block):
    count: int
    first: str  # the first matching line
    means: str  # what the event means, in words


class EngineLogBlock(Block):
    """What the engine's log says during the window (harness.diagnose.enginelog)."""

    path: str
    patterns: str  # the engine kind whose patterns were used
    missing_reason: Annotated[str | None, Omit] = None  # the log could not be read (nothing else then)
    scope: Annotated[str | None, Omit] = None
    bytes: Annotated[list[int] | None, Omit] = None  # [start, end] offsets read
    lines: Annotated[int | None, Omit] = None
    truncated_at_bytes: Annotated[int | None, Omit] = None
    events: Annotated[dict[str, LogEvent], Omit] = Field(default_factory=dict)  # recompilation, preemption, oom, ...
    warnings: Annotated[list[str], Omit] = Field(default_factory=list)


class GapCounts(Block):
    count: int
    p50_ms: float | None = None
    p99_ms: float | None = None


class EngineItl(Block):
    """An engine histogram's quantiles: null inside the first bucket, whose [0, bound] follows."""

    p50_ms: float | None = None
    p99_ms: float | None = None
    p50_bucket_ms: Annotated[list[float | None] | None, Omit] = None
    p99_bucket_ms: Annotated[list[float | None] | None, Omit] = None


class InterferenceBlock(Block):
    """ITL gaps inside vs outside long prefills (harness.diagnose.interference)."""

    long_prompt_tokens: int
    long_prefills: int
    gaps: int
    spike_factor: float
    itl_median_ms: Annotated[float | None, Omit] = None
    inside: Annotated[GapCounts | None, Omit] = None
    outside: Annotated[GapCounts | None, Omit] = None
    inside_share_of_gaps: Annotated[float | None, Omit] = None
    spikes: Annotated[int | None, Omit] = None
    spikes_inside: Annotated[int | None, Omit] = None
    spike_share_inside: Annotated[float | None, Omit] = None
    p99_ratio: Annotated[float | None, Omit] = None
    verdict: str = "none"  # none | mild | interference | too few
    message: str = ""
    engine: Annotated[dict[str, EngineItl] | None, Omit] = None  # the engine's itl/prefill/decode
    file: Annotated[str | None, Omit] = None  # the plot data beside summary.json


class MemoryBlock(Block):
    """GPU memory over the window (harness.diagnose.memory)."""

    source: str  # nvml | simulated
    samples: int
    start_gib: float | None = None
    end_gib: float | None = None
    peak_gib: float | None = None
    growth_gib: float | None = None
    total_gib: float | None = None
    margin_gib: float | None = None
    grew: bool = False
    low_margin: bool = False
    message: Annotated[str | None, Omit] = None


class Drift(Block):
    metric: str
    label: str
    first: float | None = None
    last: float | None = None
    change: float | None = None
    noise: float | None = None
    means: str


class SteadyState(Block):
    checked: bool
    drift: bool
    reason: Annotated[str | None, Omit] = None  # when not checked
    slices: Annotated[int | None, Omit] = None
    drifted: Annotated[list[Drift], Omit] = Field(default_factory=list)
    message: Annotated[str | None, Omit] = None  # when it drifted


class TimeslicesBlock(Block):
    """Per-interval figures (the rows are in timeslices.json) and the steady-state check."""

    slice_s: float
    count: int
    file: str
    steady_state: SteadyState


class Diagnosis(Block):
    """One block per analysis that had something to say (harness.diagnose.ANALYSES order)."""

    engine_log: Annotated[EngineLogBlock | AnalysisError | None, Omit] = None
    interference: Annotated[InterferenceBlock | AnalysisError | None, Omit] = None
    memory: Annotated[MemoryBlock | AnalysisError | None, Omit] = None
    timeslices: Annotated[TimeslicesBlock | AnalysisError | None, Omit] = None


#: a finding's figure: a number, a name (the TTFT part), [first, last] of a drifted metric, or a
#: figure per name (the TTFT tail's share per part)
FindingValue = Scalar | list[Num | None] | dict[str, Num | None]


class Finding(Block):
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
    value: dict[str, FindingValue] = Field(default_factory=dict)
    knobs: list[str] = Field(default_factory=list)
