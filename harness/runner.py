"""Run one scenario against one target, end to end (stub: the real body lands shortly).

Start the simulated engine when no target is given, preflight the target, start telemetry and
the stall meter, launch the load process (the only place gevent lives), follow its progress,
then assemble summary.json, print the table and write the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.results.schema import RunSummary
from harness.scenario.models import Scenario


@dataclass
class RunOptions:
    out_dir: Path
    target_url: str | None = None  # None: start the built-in simulated engine
    model: str | None = None
    sim_args: list[str] = field(default_factory=list)
    engine_kind: str | None = None  # hint for telemetry (vllm, sglang, sim, ...)
    show_progress: bool = True
    write_report: bool = True
    processes: int = 1
    scenario_path: str | None = None
    labels: dict[str, str] = field(default_factory=dict)  # e.g. sweep config id, for exporters


def run_scenario(scenario: Scenario, opts: RunOptions) -> RunSummary:
    """Measure `scenario` against `opts.target_url` and write the run directory `opts.out_dir`.

    Raises UserError when the target is unusable. Ctrl-C writes what was measured
    (status "partial") before re-raising KeyboardInterrupt.
    """
    raise NotImplementedError
