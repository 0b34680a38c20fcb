"""What tuning has cost so far (engine starts, measured and engine seconds, wall time) and the
progress lines that say so while it runs.

The ledger is DIR/cost.json, rewritten after every engine start and cell, so a resumed tune adds
to what the interrupted one spent (cells kept by resume cost nothing again).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.results.models import FILES
from harness.results.models.facts import StartupFacts
from harness.results.models.sweep import Cell as IndexCell
from harness.results.models.tune import TuneCost
from harness.results.read import load_cost
from harness.sweep.progress import Progress, fmt_duration
from harness.sweep.results import atomic_write


class Ledger:
    def __init__(self, path: Path, max_starts: int | None = None, max_hours: float | None = None) -> None:
        self.path = path
        self.max_starts = max_starts
        self.max_hours = max_hours
        self.engine_starts = 0
        self.measured_s = 0.0  # sum of the measured windows of finished cells
        self.engine_s = 0.0  # startup + cell wall time: how long engines were up for tuning
        self.wall_before_s = 0.0  # wall time of earlier (interrupted) sessions
        self.t0 = time.monotonic()
        if path.is_file():  # a resumed tune adds to what the interrupted one spent
            done = load_cost(path)
            self.engine_starts, self.measured_s, self.engine_s = done.engine_starts, done.measured_s, done.engine_s
            self.wall_before_s = done.wall_s

    @property
    def wall_s(self) -> float:
        return self.wall_before_s + time.monotonic() - self.t0

    def budget_left(self) -> str:
        parts = []
        if self.max_starts is not None:
            parts.append(f"{max(0, self.max_starts - self.engine_starts)} starts")
        if self.max_hours is not None:
            parts.append(fmt_duration(max(0.0, self.max_hours * 3600 - self.wall_s)))
        return " / ".join(parts) if parts else "no budget set"

    def exhausted(self, new_starts: int, reserve: int = 0) -> str | None:
        """Why `new_starts` more starts (keeping `reserve` for later) would break the budget, or None."""
        if self.max_starts is not None and self.engine_starts + new_starts + reserve > self.max_starts:
            return (
                f"budget: {self.engine_starts} of max_starts {self.max_starts} engine starts used; "
                f"this step needs {new_starts} more" + (f" and {reserve} is kept for the final run" if reserve else "")
            )
        if self.max_hours is not None and self.wall_s >= self.max_hours * 3600:
            return f"budget: {fmt_duration(self.wall_s)} of max_hours {self.max_hours:g} spent"
        return None

    def cost(self) -> TuneCost:
        return TuneCost(
            engine_starts=self.engine_starts,
            measured_s=round(self.measured_s, 3),
            engine_s=round(self.engine_s, 3),
            wall_s=round(self.wall_s, 3),
        )

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, FILES["cost.json"].dumps(self.cost()))

    def line(self) -> str:
        return (
            f"{self.engine_starts} engine starts, {self.measured_s / 60:.1f} measured min so far; "
            f"budget left: {self.budget_left()}"
        )


class TuneProgress(Progress):
    """The sweep's progress lines, with the tune's step, candidate and cost on each start."""

    def __init__(self, ledger: Ledger, step: str, total_cells: int, total_starts: int, enabled: bool = True) -> None:
        super().__init__(total_cells, total_starts, enabled=enabled)
        self.ledger = ledger
        self.step = step

    def engine_starting(self, config_id: str, varied: dict[str, Any], argv: list[str], n_cells: int) -> None:
        self.ledger.engine_starts += 1
        self.ledger.write()
        self._print(f"[tune] step {self.step} · candidate {config_id} · {self.ledger.line()}")
        super().engine_starting(config_id, varied, argv, n_cells)

    def engine_ready(self, startup_s: float, facts: StartupFacts) -> None:
        self.ledger.engine_s += startup_s
        self.ledger.write()
        super().engine_ready(startup_s, facts)

    def cell_done(self, entry: IndexCell, wall_s: float | None) -> None:
        if wall_s is not None:
            self.ledger.engine_s += wall_s
        if entry.status == "complete":
            summary_window = _window_s(entry)
            self.ledger.measured_s += summary_window if summary_window is not None else (wall_s or 0.0)
        self.ledger.write()
        super().cell_done(entry, wall_s)

    def finished(self, elapsed: float, counts: dict[str, int]) -> None:
        pass  # the tune prints the step's verdict instead


def _window_s(entry: IndexCell) -> float | None:
    d = entry.overrides.get("load.duration_s")
    return float(d) if isinstance(d, (int, float)) else None
