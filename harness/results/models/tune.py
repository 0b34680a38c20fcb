"""tune.json, typed (harness.tune.driver): every step's verdict with its reason, the flag sets it
tried with their figures, the flags it chose, and the final comparison with the baseline.

tune.json is rewritten after every step. The figures of a tried flag set (`Tried`) are the
means over the scenarios at the expected load of its sweep cells' metrics (`CellMetrics` names),
plus a few read from the cells' summary.json. Goodput is `goodput_req_per_s` here as in
index.json (requests/s within every SLO; the plain request rate where no SLO is set).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.results.models.base import Block, Num, Omit
from harness.results.models.facts import FactNum
from harness.results.models.sweep import Flags, FlagValue


class MetricJudgement(Block):
    """One metric of a candidate vs the current flags, as `harness compare` judged it."""

    label: str
    baseline: float | None = None
    candidate: float | None = None
    change: float | None = None
    unit: str = "%"
    interval: list[float] | None = None
    verdict: str  # improved | REGRESSION | ok | within noise | too few samples | n/a
    p_adjusted: float | None = None  # Holm-adjusted over the comparison's metrics


class GoodputJudgement(Block):
    """One scenario's goodput, candidate vs incumbent, by the noise-aware compare (harness.tune.judge)."""

    metric: str  # goodput_rps | rps (no SLO)
    baseline: float | None = None
    candidate: float | None = None
    change_pct: float | None = None
    interval: list[float] | None = None  # the change's confidence interval, %
    tests: list[str] = Field(default_factory=list)
    compare_verdict: str | None = None  # improved | REGRESSION | ok | ...
    verdict: str  # better | worse | tie | same
    closed_loop: Annotated[str | None, Omit] = None  # the per-request test that decided a tie
    #: every metric of the comparison (harness compare's rows for the same cells), by key
    metrics: Annotated[dict[str, MetricJudgement] | None, Omit] = None


class VsCurrent(Block):
    verdict: str  # better | worse | tie | failed (harness.tune.judge)
    by: str  # the rule that decided: prior | gain | harm | capacity | tie | failed
    rule: Annotated[str | None, Omit] = None  # that rule in words, with the metrics it read
    evidence_repeats: Annotated[int | None, Omit] = None  # interleaved repeats of both sides bought to decide it
    per_scenario: dict[str, GoodputJudgement] = Field(default_factory=dict)
    #: the incumbent's cells this judgement read (harness compare THESE CANDIDATE-CELLS reproduces it)
    against: Annotated[list[str] | None, Omit] = None


class FindingBrief(Block):
    id: str
    text: str
    advice: str = ""
    knobs: list[str] = Field(default_factory=list)


class TriedQuality(Block):
    """The quality gate's verdict of a flag set (harness.tune.quality.row)."""

    status: str
    passed: bool | None = None
    short: str = ""
    reasons: list[str] = Field(default_factory=list)
    exact_agreement: float | None = None
    accuracy: float | None = None
    accuracy_drop: float | None = None


class Tried(Block):
    """A flag set a step measured, with its figures (harness.tune.measure.Measurement.row)."""

    flags: Flags = Field(default_factory=dict)
    config_id: str
    sweep: str  # the step's sweep directory under steps/
    cells: list[str] = Field(default_factory=list)  # "<sweep>/<cell id>"
    status: str  # complete | failed
    reason: str | None = None
    goodput_req_per_s: float | None = None  # requests/s within every SLO (req/s without an SLO)
    goodput_fraction: float | None = None
    req_per_s: float | None = None
    capacity: dict[str, str | None] | None = None  # per scenario: the highest load level held within the SLOs
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p99_ms: float | None = None
    output_tok_per_s: float | None = None
    input_tok_per_s: float | None = None
    kv_usage_max: float | None = None
    kv_usage_mean: float | None = None
    preemptions: float | None = None
    prefix_hit_rate: float | None = None
    spec_acceptance_rate: float | None = None
    spec_mean_acceptance_length: float | None = None
    gpu_memory_used_max_bytes: float | None = None
    kv_cache_tokens: FactNum | None = None
    itl_p99_inside_prefill_ms: float | None = None
    recompilations: float | None = None
    findings: list[FindingBrief] = Field(default_factory=list)
    quality: TriedQuality | None = None
    # what a step adds to the row
    vs_current: Annotated[VsCurrent | None, Omit] = None
    startup_s: Annotated[float | None, Omit] = None  # cuda-graphs: the start's cost
    itl_p99_vs_current: Annotated[str | None, Omit] = None  # max-num-batched-tokens
    storm: Annotated[str | None, Omit] = None  # max-num-seqs: the preemption storm it shows
    kv_full: Annotated[str | None, Omit] = None  # max-num-seqs: steady-state KV at 85% or more
    cost_too_high: Annotated[str | None, Omit] = None  # max-num-batched-tokens: ITL p50/TTFT lost more than ITL p99 won
    low_acceptance: Annotated[str | None, Omit] = None  # speculative


class Delta(Block):
    """One metric of the final run against the baseline (harness compare's row)."""

    baseline: float | None = None
    final: float | None = None
    change: float | None = None
    unit: str = "%"
    verdict: str
    interval: list[float] | None = None
    p_adjusted: Annotated[float | None, Omit] = None  # Holm-adjusted over the comparison's metrics


class VsBaseline(Block):
    """The final run against the baseline: every metric beyond noise, both ways (harness.tune.steps.final)."""

    verdict: str  # better | worse | mixed | same
    goodput: dict[str, GoodputJudgement] = Field(default_factory=dict)
    by: str = ""
    guard: Annotated[str | None, Omit] = None  # goodput, or requests/s without an SLO
    improvements: Annotated[list[str] | None, Omit] = None  # every metric better beyond noise, with its interval
    regressions: list[str] = Field(default_factory=list)  # every metric worse beyond noise
    within_noise: Annotated[list[str] | None, Omit] = None  # the guard when it did not move beyond noise
    undecided: Annotated[list[str] | None, Omit] = None  # beyond the threshold, not beyond noise
    facts: Annotated[list[str] | None, Omit] = None  # KV usage, share within the SLOs, hit rate, GPU memory
    deltas: dict[str, dict[str, Delta]] = Field(default_factory=dict)  # scenario -> metric key -> delta
    #: the chosen flags measured twice (by their step and here) differ beyond noise: the machine drifted
    drift: Annotated[str | None, Omit] = None
    #: the final flags' greedy outputs against the baseline's (a tune with a quality block)
    quality: Annotated[TriedQuality | None, Omit] = None


class StepDetails(Block):
    """What a step records beside its verdict: where its candidates came from, the final comparison."""

    derived: Annotated[str | None, Omit] = None  # max-num-seqs: how the candidates were derived
    candidates: Annotated[list[FlagValue] | None, Omit] = None  # the values tried
    formula: Annotated[list[Num] | None, Omit] = None  # max-num-seqs: what the formula gave when nothing was tried
    vs_baseline: Annotated[VsBaseline | None, Omit] = None  # the final step


class TuneStep(Block):
    step: str
    verdict: str  # changed | kept | skipped | failed
    reason: str
    tried: list[Tried] = Field(default_factory=list)
    chosen: Flags = Field(default_factory=dict)
    details: Annotated[StepDetails | None, Omit] = None


class SavedBaseline(Block):
    name: str
    path: str


class TuneFinal(Block):
    flags: Flags = Field(default_factory=dict)
    command: list[str] = Field(default_factory=list)
    vs_baseline: VsBaseline | None = None
    baseline: Annotated[SavedBaseline | None, Omit] = None  # the final run saved as `tune-<name>`


class TuneCost(Block):
    """What the tune spent (also DIR/cost.json, rewritten after every start and cell)."""

    engine_starts: int = 0
    measured_s: float = 0.0
    engine_s: float = 0.0
    wall_s: float = 0.0


class TuneDoc(Block):
    """tune.json (module doc)."""

    schema_version: int = 1
    name: str
    tune_file: str
    status: str  # complete | failed (a step failed; exit 1) | interrupted
    updated: str | None = None
    expected_load: dict[str, Num] = Field(default_factory=dict)  # {"load.concurrency": 8.0}
    baseline_flags: Flags = Field(default_factory=dict)
    steps: list[TuneStep] = Field(default_factory=list)
    final: TuneFinal = Field(default_factory=TuneFinal)
    cost: TuneCost = Field(default_factory=TuneCost)
