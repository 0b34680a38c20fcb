"""Load a sweep directory for reports and comparisons: index.json's cells with their runs.

A cell whose run directory is missing or damaged still appears (with its status and a note), so
a report of a sweep that was stopped or partly failed shows what ran and what did not. The runs
themselves load through harness.report.data (which tolerates crashed runs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.errors import UserError
from harness.report.data import RUN_FILES, RunData, _short, find_file, load_run, read_json
from harness.results.models.sweep import Cell as IndexCell
from harness.results.sweep_index import DEFAULT_ATTAINMENT, scenario_label


@dataclass
class Cell:
    id: str
    config_id: str
    scenario: str
    repeat: int
    status: str
    flags: dict[str, Any]
    reason: str | None
    startup_s: float | None
    run_dir: Path | None
    run: RunData | None = None
    entry: IndexCell | None = None  # the cell's index.json entry (None: it did not parse)
    #: the scenario file's name; `scenario` adds the load level (`mixed @ concurrency=16`) when
    #: the sweep has `loads`, so configs are ranked and compared at equal load only
    base_scenario: str = ""
    load_level: str | None = None

    @property
    def usable(self) -> bool:
        return (
            self.run is not None and self.status in ("complete", "partial") and self.run.summary.requests.completed > 0
        )


@dataclass
class SweepData:
    path: Path
    name: str
    cells: list[Cell]
    notes: list[str] = field(default_factory=list)
    slo_attainment: float = DEFAULT_ATTAINMENT

    @property
    def configs(self) -> list[str]:
        seen: list[str] = []
        for c in self.cells:
            if c.config_id not in seen:
                seen.append(c.config_id)
        return seen

    @property
    def scenarios(self) -> list[str]:
        seen: list[str] = []
        for c in self.cells:
            if c.scenario not in seen:
                seen.append(c.scenario)
        return seen

    def flags_of(self, config_id: str, varied_only: bool = True) -> dict[str, Any]:
        """A config's flags; by default only those that differ between the sweep's configs (the
        shared ones are `common_flags`)."""
        for c in self.cells:
            if c.config_id == config_id:
                if not varied_only:
                    return c.flags
                common = self.common_flags()
                return {k: v for k, v in c.flags.items() if k not in common}
        return {}

    def common_flags(self) -> dict[str, Any]:
        """Flags every config sets to the same value (the sweep's base)."""
        per_config: dict[str, dict[str, Any]] = {}
        for c in self.cells:
            per_config.setdefault(c.config_id, c.flags)
        if len(per_config) < 2:
            return {}
        first, *rest = per_config.values()
        return {k: v for k, v in first.items() if all(k in o and o[k] == v for o in rest)}

    def cells_for(self, config_id: str, scenario: str) -> list[Cell]:
        return [c for c in self.cells if c.config_id == config_id and c.scenario == scenario]


def _first_error(exc: ValidationError) -> str:
    e = exc.errors()[0]
    return f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"


def load_sweep(path: Path | str, load_runs: bool = True, requests: bool | None = True) -> SweepData:
    """A sweep directory and (`load_runs`) its cells' runs; `requests` as harness.report.data.load_run."""
    sweep_dir = Path(path)
    ipath = sweep_dir / "index.json"
    if not ipath.is_file():
        raise UserError(
            f"{sweep_dir}: no index.json; pass the directory `harness sweep` wrote (it holds index.json and one run directory per cell)"
        )
    try:
        index = read_json(ipath)
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(
            f"{ipath}: unreadable ({_short(exc)}); re-run `harness sweep --resume {sweep_dir}` to rewrite it"
        ) from None
    if not isinstance(index, dict) or not isinstance(index.get("cells"), list):
        raise UserError(f"{ipath}: expected an object with a 'cells' list; was it written by `harness sweep`?")
    notes: list[str] = []
    cells: list[Cell] = []
    for i, raw in enumerate(index["cells"]):
        if not isinstance(raw, dict):
            notes.append(f"index.json: cells[{i}] is not an object; skipped")
            continue
        try:
            entry: IndexCell | None = IndexCell.model_validate(raw)
        except ValidationError as exc:
            entry = None
            notes.append(f"index.json: cells[{i}]: {_first_error(exc)}; shown from its readable fields only")
        rd = raw.get("run_dir")
        run_dir = (sweep_dir / rd) if isinstance(rd, str) and rd else None
        cell = Cell(
            id=str(raw.get("id") or f"cell{i}"),
            config_id=str(raw.get("config_id") or "?"),
            scenario=scenario_label(str(raw.get("scenario") or "?"), raw.get("load_level") or None),
            base_scenario=str(raw.get("scenario") or "?"),
            load_level=str(raw["load_level"]) if raw.get("load_level") else None,
            repeat=int(raw.get("repeat") or 0),
            status=str(raw.get("status") or "unknown"),
            flags=flags if isinstance(flags := raw.get("flags"), dict) else {},
            reason=raw.get("reason"),
            startup_s=raw.get("startup_s") if isinstance(raw.get("startup_s"), (int, float)) else None,
            run_dir=run_dir,
            entry=entry,
        )
        if load_runs and run_dir is not None and run_dir.is_dir() and any(find_file(run_dir, n) for n in RUN_FILES):
            try:
                cell.run = load_run(run_dir, requests=requests)
            except UserError as exc:
                notes.append(f"cell {cell.id}: {exc.lines[0]}")
        elif load_runs and cell.status != "failed":
            notes.append(
                f"cell {cell.id} ({cell.config_id} × {cell.scenario}): status {cell.status} but its run directory {rd!r} is missing"
            )
        cells.append(cell)
    name = str(index.get("sweep") or sweep_dir.name)
    att = index.get("slo_attainment")
    attainment = float(att) if isinstance(att, (int, float)) and 0 < att <= 1 else DEFAULT_ATTAINMENT
    return SweepData(path=sweep_dir, name=name, cells=cells, notes=notes, slo_attainment=attainment)
