"""A sweep directory's index.json, typed: one `Cell` per planned run (harness.sweep.results).

index.json is rewritten whole after every cell. A cell's entry is a Record: the executor adds
what it knows about the engine start (argv, log, port, devices, a failed start's log tail, ...)
in the order it learns it. `CellMetrics` are the figures of the cell's run, read from its
summary.json when the cell finished (harness.results.run_metrics names them).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue

from harness.results.models.base import Block, Num, Omit, Record
from harness.results.models.facts import StartupFacts

#: an engine flag's value as the sweep file gave it (a number, a string, a bool, a JSON object ...)
FlagValue = JsonValue
Flags = dict[str, FlagValue]


class CellMetrics(Record):
    """summary.csv's figures of one run (harness.sweep.results.run_metrics); `{}` without a run.

    The latency columns are the metric table's "sweep" entries (harness.metrics.table), p50 and
    p99 each; tests/results/test_models.py holds this list to the table."""

    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p99_ms: float | None = None
    req_per_s: float | None = None
    output_tok_per_s: float | None = None
    input_tok_per_s: float | None = None
    goodput_req_per_s: float | None = None  # requests/s within every SLO
    goodput_fraction: float | None = None
    kv_usage_max: float | None = None
    preemptions: float | None = None
    prefix_hit_rate: float | None = None
    completed: int | None = None
    failed: int | None = None
    client_concurrency: int | None = None  # the load the cell ran at (vary.link may change it)
    client_rate: float | None = None
    gpu_memory_used_max_gib: float | None = None
    spec_acceptance_rate: float | None = None  # speculative runs only: accepted / drafted tokens
    spec_mean_acceptance_length: float | None = None  # speculative runs only: tokens per step, the bonus token included
    itl_p99_inside_prefill_ms: float | None = None
    itl_p99_outside_prefill_ms: float | None = None
    recompilations: int | None = None
    memory_growth_gib: float | None = None
    drift: bool | None = None
    finding: str | None = None  # the top finding: "<text>: <advice>"
    finding_ids: str | None = None  # every finding's id, comma-separated


#: a CellMetrics field's name, for readers that pick a figure by name (tests/results/test_models.py
#: holds it to the fields)
CellMetricName = Literal[
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "req_per_s",
    "output_tok_per_s",
    "input_tok_per_s",
    "goodput_req_per_s",
    "goodput_fraction",
    "kv_usage_max",
    "preemptions",
    "prefix_hit_rate",
    "completed",
    "failed",
    "client_concurrency",
    "client_rate",
    "gpu_memory_used_max_gib",
    "spec_acceptance_rate",
    "spec_mean_acceptance_length",
    "itl_p99_inside_prefill_ms",
    "itl_p99_outside_prefill_ms",
    "recompilations",
    "memory_growth_gib",
    "drift",
    "finding",
    "finding_ids",
]


class CellQuality(Block):
    """The config's quality verdict against the sweep's baseline config (harness.sweep.quality_step)."""

    status: str
    passed: bool | None = None
    short: str = ""
    reasons: list[str] = Field(default_factory=list)
    cell: str | None = None  # the cell whose run directory holds the outputs
    exact_agreement: float | None = None
    accuracy: float | None = None


class Cell(Record):
    """One cell of the sweep: a config's engine x a scenario x a load level x a repeat."""

    id: str
    config_id: str
    flags: Flags = Field(default_factory=dict)
    scenario: str
    load_level: str | None = None  # "concurrency=8" with the sweep's `loads`
    load: dict[str, Num] | None = None  # {"load.concurrency": 8}
    repeat: int = 1
    status: str  # complete | partial | failed
    run_dir: str | None = None  # relative to the sweep directory
    startup_s: float | None = None
    startup_facts: StartupFacts = Field(default_factory=StartupFacts)
    reason: str | None = None
    varied: Flags = Field(default_factory=dict)
    overrides: dict[str, JsonValue] = Field(default_factory=dict)
    scenario_path: str | None = None
    metrics: CellMetrics = Field(default_factory=CellMetrics)
    finished: str | None = None
    argv: list[str] = Field(default_factory=list)
    log: str | None = None  # the engine's log, relative to the sweep directory
    port: int | None = None
    url: str | None = None  # engine kind external
    replicas: int | None = None
    devices: int | None = None
    endpoints: list[str] | None = None
    log_tail: list[str] | None = None  # a failed start or a dead engine
    failed_after_s: float | None = None  # a failed start: seconds from launch to the failure
    notes: list[str] = Field(default_factory=list)
    started: str | None = None
    duration_s: float | None = None
    quality: CellQuality | None = None


class SweepIndex(Block):
    """index.json (module doc)."""

    sweep: str
    sweep_file: str
    created: str
    updated: str | None = None
    slo_attainment: Annotated[float, Omit] = 0.95  # (absent from sweeps written before it existed)
    cells: list[Cell] = Field(default_factory=list)
