"""Pydantic models of the tune file (`harness tune FILE`).

Every model forbids unknown keys, like sweep files: a misspelt setting is an error naming its
field path, not a silently ignored knob. `engine` is the sweep's own EngineSpec, so every engine
kind works the same way here (except `external`: tuning needs restarts). And, as in scenario
files, no value is coerced and none is infinite or NaN, and counts have the harness's bounds
(audit R13: `concurrency: true` ran at 1 user, `"4"` was 4, `warmup_s: .inf` passed --plan and
failed the baseline step with pydantic's text, `capacity_levels: [1e308]` ended in an internal error).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness import limits
from harness.engines import get_kind
from harness.scenario.models import SLO, within
from harness.scenario.quality import QualitySpec
from harness.sweep.models import EngineSpec, Flags, FlagValue, _check_flag_names


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


#: the highest multiple of the expected load a capacity level may be
MAX_CAPACITY_LEVEL = 100.0


class ExpectedLoad(Strict):
    """The expected peak: closed-loop users or an open-loop request rate (one of them)."""

    concurrency: Annotated[int, Field(ge=1), within(limits.CONCURRENCY)] | None = None
    rate: Annotated[float, Field(gt=0)] | None = None
    capacity_levels: list[Annotated[float, Field(gt=1, le=MAX_CAPACITY_LEVEL)]] = Field(
        default_factory=list,
        description="multiples of the expected load also run on every candidate's engine (same start), "
        "so that a goodput tie is broken by the capacity under the SLOs; empty = ties keep the current flags",
    )

    @model_validator(mode="after")
    def _one(self) -> ExpectedLoad:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("give one of concurrency: N (users) or rate: R (requests/s)")
        if self.concurrency is not None and self.capacity_levels:
            problem = limits.CONCURRENCY.check(self.concurrency * max(self.capacity_levels))
            if problem:
                raise ValueError(f"capacity_levels: the highest level is {problem}")
        return self

    @property
    def path(self) -> str:
        return "load.concurrency" if self.concurrency is not None else "load.rate"

    @property
    def value(self) -> float:
        if self.concurrency is not None:
            return float(self.concurrency)
        assert self.rate is not None  # one of the two (checked at load)
        return self.rate

    def levels(self) -> list[float]:
        """Expected load first, then the capacity levels (rounded to whole users for concurrency)."""
        out = [self.value]
        for m in self.capacity_levels:
            v = self.value * m
            v = float(round(v)) if self.concurrency is not None else round(v, 4)
            if v not in out:
                out.append(v)
        return out


class Context(Strict):
    max_model_len: Annotated[int, Field(ge=16), within(limits.TOKENS)] | None = Field(
        default=None, description="required context length; default: the workload's longest input + output"
    )


class Budget(Strict):
    max_starts: Annotated[int, Field(ge=1)] | None = None
    max_hours: Annotated[float, Field(gt=0)] | None = None


class Measure(Strict):
    """How each candidate is measured: the window replaces the scenarios' own."""

    duration_s: Annotated[float, Field(gt=0), within(limits.DURATION)] = 60.0
    warmup_s: Annotated[float, Field(ge=0), within(limits.DURATION)] = 10.0
    repeats: Annotated[int, Field(ge=1, le=100)] = 1
    threshold_pct: Annotated[float, Field(ge=0)] = Field(
        default=5.0, description="a change must also beat the current best by more than this share of goodput"
    )
    evidence_repeats: Annotated[int, Field(ge=0, le=10)] = Field(
        default=2,
        description="when a difference is beyond the threshold but not yet beyond noise, up to this many more "
        "interleaved repeats of both sides (one engine start each) before it is called a tie",
    )


STEP_NAMES = (
    "context-length",
    "gpu-memory",
    "baseline",
    "max-num-seqs",
    "cuda-graphs",
    "max-num-batched-tokens",
    "cache-check",
    "kv-dtype",
    "parallelism",
    "speculative",
    "final",
)


class TuneFile(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    engine: EngineSpec
    base: Flags = Field(default_factory=dict, description="the deployment's current flags; empty = engine defaults")
    workload: Annotated[list[str], Field(min_length=1)] = Field(description="scenario files, relative to this file")
    load: ExpectedLoad
    slo: SLO | None = Field(default=None, description="replaces every scenario's SLO; none = the scenarios' own")
    slo_attainment: Annotated[float, Field(gt=0, le=1)] = 0.95
    context: Context = Field(default_factory=Context)
    steps: list[str] | None = Field(default=None, description="default: all, in the guide's order")
    candidates: dict[str, Annotated[list[FlagValue], Field(min_length=1)]] = Field(
        default_factory=dict, description="per flag, the values the user allows; otherwise the procedure derives them"
    )
    budget: Budget = Field(default_factory=Budget)
    measure: Measure = Field(default_factory=Measure)
    quality: QualitySpec | None = Field(
        default=None,
        description="the quality block of scenario and sweep files (docs/quality.md); the kv-dtype and "
        "speculative steps accept a change only with its gate passed; absent: 'quality not checked'",
    )
    gpus: Annotated[int, Field(ge=1, le=1024)] = Field(default=1, description="GPUs the parallelism step may use")

    @field_validator("base")
    @classmethod
    def _base(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_flag_names(v)

    @field_validator("candidates")
    @classmethod
    def _cands(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_flag_names(v)

    @field_validator("steps")
    @classmethod
    def _steps(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        bad = [s for s in v if s not in STEP_NAMES]
        if bad:
            raise ValueError(f"unknown step {', '.join(bad)}; steps are: {', '.join(STEP_NAMES)}")
        if len(set(v)) != len(v):
            raise ValueError("a step is listed twice")
        return v

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: EngineSpec) -> EngineSpec:
        if not get_kind(v.kind).starts_engine:
            raise ValueError(
                f"kind {v.kind} is refused: tuning restarts the engine with other flags; "
                "use the kind that starts it (vllm, sglang, sim, custom, ...)"
            )
        return v

    def step_order(self) -> list[str]:
        """The guide's order, whatever order the file lists them in."""
        chosen = set(self.steps) if self.steps is not None else set(STEP_NAMES)
        return [s for s in STEP_NAMES if s in chosen]
