"""capacity.json, typed: a capacity search (`harness capacity`, harness.capacity.search), and the
sweep's `--capacity-search` file that holds one search per config.

A search brackets, then bisects the load level until the boundary is within its precision:
`boundary` <= capacity < `first_failing`. Rewritten after every trial.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, RootModel

from harness.results.models.base import Block, Num, Omit, Record


class TrialFigures(Record):
    """A trial's run in a few figures, or the one-line error of a trial that could not run."""

    completed: int | None = None
    failed: int | None = None
    rps: float | None = None
    output_tok_s: float | None = None
    ttft_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    error: str | None = None


class Trial(Block):
    """One load level measured (its run directory is a normal run)."""

    level: Num
    attainment: float | None = None  # share of requests within every SLO; None: nothing finished
    passed: bool = False  # after the monotone fit
    saturated: str | None = None  # why the trial was stopped early (over-saturated)
    run_dir: str | None = None
    status: str = "complete"
    wall_s: float = 0.0
    figures: TrialFigures = Field(default_factory=TrialFigures)
    warnings: Annotated[list[str] | None, Omit] = None  # the trial run's validity warnings
    remeasured: Annotated[bool | None, Omit] = None  # a second look at a level whose results were not monotone


class CapacitySearch(Block):
    """capacity.json of `harness capacity` (with `target`), or one config's search of a sweep."""

    scenario: str
    target: Annotated[str | None, Omit] = None  # `harness capacity` only
    knob: str  # rate | concurrency
    attainment_target: float
    precision: float
    boundary: Num | None = None  # highest level that passed: the capacity to plan with
    first_failing: Num | None = None
    trials: list[Trial] = Field(default_factory=list)
    converged: bool = False
    stop_reason: str = ""
    wall_s: float = 0.0
    monotone_note: Annotated[str | None, Omit] = None  # levels not monotone in load, what was re-measured
    relative_gap: float | None = None  # (first_failing - boundary) / first_failing
    saturated_trials: int = 0


class SweepCapacity(RootModel[dict[str, CapacitySearch]]):
    """A sweep's capacity.json (`harness sweep --capacity-search`): per config id, its search."""
