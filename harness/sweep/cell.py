"""One planned cell as the sweep runs it: the scenario it measures, the run's options, the index entry.

Pure functions of the plan and what happened, so the executor (harness.sweep.execute) keeps only
the walk and its failure policy, and what a cell measures and records can be read in one place.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.results.models.facts import StartupFacts
from harness.results.models.summary import RunSummary
from harness.results.models.sweep import Cell as IndexCell
from harness.results.models.sweep import CellMetrics
from harness.results.verdict import failure_reason
from harness.scenario.models import Scenario, Warmup
from harness.sweep.plan import Cell
from harness.sweep.results import run_metrics


def cell_scenario(cell: Cell, sweep: Any, urls: list[str], first_after_start: bool) -> Scenario:
    """The cell's scenario as run on this start: over the config's replicas, without the quality
    pass (the sweep runs it once per config itself), with the sweep's warmup policy."""
    scenario = cell.resolved
    if len(urls) > 1:  # engine.replicas: the load is spread over the config's replicas
        data = scenario.model_dump(mode="json")
        data["target"].update(url=None, replicas=1, endpoints=urls)
        scenario = Scenario.model_validate(data)
    if scenario.quality is not None:
        scenario = scenario.model_copy(update={"quality": None})
    warm = sweep.warmup
    if warm is not None:
        if first_after_start or warm.every_cell:
            w = Warmup(requests=warm.requests, duration_s=warm.duration_s)
        else:
            w = Warmup()
        scenario = scenario.model_copy(update={"warmup": w})
    return scenario


def cell_run_options(
    cell: Cell,
    sweep: Any,
    kind: Any,
    run_dir: Path,
    base_url: str,
    metrics_server: Any,
    progress_sink: Any,
    engine_log: Path | None,
    engine: Any = None,
) -> Any:
    """harness.run.RunOptions for the cell: no report or progress of its own, sweep labels; the
    engine the sweep started is watched (its death ends the cell's load at once)."""
    from harness.run import RunOptions

    return RunOptions(
        out_dir=run_dir,
        target_url=base_url,
        model=sweep.engine.served_model_name,
        engine_kind=kind.telemetry_profile or kind.name,
        show_progress=False,
        write_report=False,
        scenario_path=str(cell.scenario.path),
        labels={
            "config": cell.config.id,
            "sweep": sweep.name,
            "scenario": cell.scenario.name,
            "repeat": str(cell.repeat),
            **({"load_level": cell.level.label} if cell.level else {}),
        },
        metrics_server=metrics_server,
        progress_sink=progress_sink,
        # the engine's log: the run counts what it says during the window (harness.diagnose)
        engine_log=engine_log,
        engine=engine,
    )


def cell_entry(
    cell: Cell,
    status: str,
    reason: str | None,
    startup_s: float | None,
    startup_facts: StartupFacts | None,
    extra: dict[str, Any] | None,
    summary: RunSummary | None,
) -> IndexCell:
    """The cell's index entry (harness.results.models.sweep.Cell; `extra`: what the executor knows
    about the engine start, in the order it learnt it); a 'complete' run without summary.json is
    recorded as partial. A failed or partial cell always carries a reason (why_not_complete)."""
    entry: dict[str, Any] = {
        "id": cell.id,
        "config_id": cell.config.id,
        "flags": cell.config.flags,
        "scenario": cell.scenario.name,
        "load_level": cell.level.label if cell.level else None,
        "load": {cell.level.path: cell.level.value} if cell.level else None,
        "repeat": cell.repeat,
        "status": status,
        "run_dir": cell.run_dir,
        "startup_s": startup_s,
        "startup_facts": startup_facts if startup_facts is not None else StartupFacts(),
        "reason": reason if status == "complete" else why_not_complete(cell, status, reason, summary, extra),
        "varied": cell.config.varied,
        "overrides": cell.overrides,
        "scenario_path": str(cell.scenario.path),
        "metrics": run_metrics(summary) if summary is not None else CellMetrics(),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        **(extra or {}),
    }
    if status == "complete" and summary is None:
        entry["status"] = "partial"
        entry["reason"] = reason or "the run wrote no summary.json"
    return IndexCell.model_validate(entry)


def why_not_complete(
    cell: Cell, status: str, reason: str | None, summary: RunSummary | None, extra: dict[str, Any] | None
) -> str:
    """The failed or partial cell's reason, never empty: what the executor knew, else what the
    run's summary.json says (its status_reason, the verdict `harness run` exits on, its first
    validity warning), else the engine log's last line, else where to look. Why: a run that ends
    'failed' without raising left the sweep row `failed:` with nothing after it (audit N12)."""
    if reason:
        return reason
    if summary is not None:
        stopped = f"stopped early: {summary.load.stopped_early}" if summary.load.stopped_early else None
        why = summary.status_reason or failure_reason(summary) or stopped or next(iter(summary.validity.warnings), None)
        if why:
            return why
    tail = [line.strip() for line in (extra or {}).get("log_tail") or [] if line.strip()]
    if tail:
        return f"the run ended {status} without saying why; the engine log ends: {tail[-1]}"
    log = (extra or {}).get("log")
    return (
        f"the run ended {status} without saying why"
        + ("" if summary is not None else " and wrote no summary.json")
        + f"; see {cell.run_dir}/"
        + (f" and {log}" if log else "")
    )
