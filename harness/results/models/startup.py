"""startup.json, typed (harness.startup.results): every engine start with its phases and facts,
per config the min/median/max per phase of its cold and warm starts, the steady-state figures of
the scenario measured after the last warm start, and the trade-off against the first config.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.results.models.base import Block, Omit, Record
from harness.results.models.facts import StartupFacts
from harness.results.models.sweep import Flags


class Phases(Block):
    """One start's time to ready split into phases that add up (harness.results.startup_phases)."""

    load: float | None = None
    compile: float | None = None
    kv_profile: float | None = None
    capture: float | None = None
    rest: float | None = None


class Start(Record):
    """One engine start to ready (status ok) or its failure."""

    id: str
    config_id: str
    kind: str  # cold | warm
    n: int
    argv: list[str] = Field(default_factory=list)
    log: str | None = None
    cache_dir: str | None = None
    started: str | None = None
    note: str | None = None
    status: str | None = None  # ok | failed
    reason: str | None = None
    log_tail: list[str] | None = None
    ready_s: float | None = None
    facts: StartupFacts = Field(default_factory=StartupFacts)
    failed_after_s: float | None = None
    phases: Phases | None = None
    logged_s: float | None = None
    engine_init_s: float | None = None


class ConfigFlags(Block):
    flags: Flags = Field(default_factory=dict)
    varied: Flags = Field(default_factory=dict)


class Steady(Block):
    """The scenario on the config's last warm start (its run under steady/)."""

    status: str | None = None
    reason: str | None = None
    run_dir: str | None = None
    output_tok_per_s: float | None = None
    req_per_s: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None


class PhaseStats(Block):
    min: float
    median: float
    max: float
    n: int


class FailedStart(Block):
    id: str
    reason: str | None = None


class StartupConfig(Block):
    id: str
    flags: Annotated[Flags, Omit] = Field(default_factory=dict)
    varied: Annotated[Flags, Omit] = Field(default_factory=dict)
    #: cold | warm -> ready | <phase> -> stats over that kind's successful starts
    summary: dict[str, dict[str, PhaseStats]] = Field(default_factory=dict)
    facts: StartupFacts = Field(default_factory=StartupFacts)
    facts_line: str = ""
    failed: list[FailedStart] = Field(default_factory=list)
    steady: Steady | None = None


class Tradeoff(Block):
    """A config against the first: the startup it saves and the steady throughput it costs."""

    config_id: str
    vs: str
    cold_saved_s: float | None = None
    warm_saved_s: float | None = None
    output_tok_per_s: float | None = None
    vs_output_tok_per_s: float | None = None
    throughput_change: float | None = None
    payback_s: float | None = None  # seconds of full-load serving until the later-ready one catches up


class StartupDoc(Block):
    """startup.json (module doc); rewritten whole after every start (written with indent 1)."""

    schema_version: int = 1
    name: str
    file: str
    description: str = ""
    engine: str
    cold: int
    warm: int
    cold_model: bool = False
    scenario: str | None = None
    created: str
    updated: str | None = None
    interrupted: bool = False
    config_order: list[str] = Field(default_factory=list)
    config_flags: dict[str, ConfigFlags] = Field(default_factory=dict)
    starts: list[Start] = Field(default_factory=list)
    steady: dict[str, Steady] = Field(default_factory=dict)
    configs: list[StartupConfig] = Field(default_factory=list)
    tradeoffs: list[Tradeoff] = Field(default_factory=list)
