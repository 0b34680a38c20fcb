"""The startup file: the sweep file's engine, base flags and `vary`, plus the start counts.

    name: eager-vs-graphs
    engine: {kind: sim}
    base: {max-num-seqs: 64}
    vary: {flags: {enforce-eager: [true]}}
    cold: 3            # starts with empty compilation and engine caches
    warm: 3            # starts that keep the caches of the last cold start
    cold_model: false  # true: cold starts also get an empty model cache (HF_HOME): weights are fetched again
    scenario: ../smoke.yaml   # optional: measured after the last warm start

Strict like every file users write: an unknown key is an error naming it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from harness.engines import get_kind
from harness.sweep.models import EngineSpec, Flags, Strict, SweepFile, SweepWarmup, Vary, _check_flag_names


class StartupFile(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    engine: EngineSpec
    base: Flags = Field(default_factory=dict)
    vary: Vary = Field(default_factory=Vary)
    cold: Annotated[int, Field(ge=0, le=50)] = Field(
        default=3, description="cold starts per config (empty caches each)"
    )
    warm: Annotated[int, Field(ge=0, le=50)] = Field(
        default=3, description="warm starts per config (caches of the last cold start)"
    )
    cold_model: bool = Field(default=False, description="cold starts also get an empty model cache (HF_HOME)")
    scenario: str | None = Field(
        default=None, description="scenario file measured after the last warm start, relative to this file"
    )
    overrides: dict[str, Any] = Field(default_factory=dict, description="scenario overrides")
    warmup: SweepWarmup | None = None

    @field_validator("base")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_flag_names(v)

    @model_validator(mode="after")
    def _shape(self) -> StartupFile:
        if not get_kind(self.engine.kind).starts_engine:
            raise ValueError(
                f"engine.kind {self.engine.kind}: a startup benchmark starts the engine itself; use the kind that runs it"
            )
        if self.cold + self.warm == 0:
            raise ValueError("cold and warm are both 0: nothing would start; set cold: 3 or warm: 3")
        if self.overrides and not self.scenario:
            raise ValueError("overrides apply to the scenario; name a scenario or remove overrides")
        if self.warmup is not None and not self.scenario:
            raise ValueError("warmup applies to the scenario run; name a scenario or remove warmup")
        return self

    def as_sweep(self) -> SweepFile:
        """The sweep file the configs (and the scenario cell) are planned from."""
        return SweepFile(
            name=self.name,
            description=self.description,
            engine=self.engine,
            base=self.base,
            vary=self.vary,
            scenarios=[self.scenario or "(no scenario)"],
            overrides=self.overrides,
            warmup=self.warmup,
            reset_prefix_cache_between=False,
        )
