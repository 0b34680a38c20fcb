"""What `compare` compares and what it answers: the sides, the options, rows, pairs, the result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.compare.model import Options, Row
from harness.errors import UserError
from harness.report import baselines
from harness.report.data import RunData, kind_of, load_run, run_subdirs
from harness.report.sweep_data import SweepData, load_sweep

__all__ = ["Options", "Pair", "Result", "Row", "Side", "load_side"]


# ---------------------------------------------------------------- sides


@dataclass
class Side:
    spec: str
    role: str  # "baseline" | "candidate"
    paths: list[Path]
    runs: list[RunData] = field(default_factory=list)
    sweep: SweepData | None = None

    @property
    def kind(self) -> str:
        return "sweep" if self.sweep is not None else "runs"

    def describe(self) -> str:
        where = ", ".join(str(p) for p in self.paths)
        head = self.spec if self.spec.startswith(baselines.PREFIX) else where
        extra = f" → {where}" if self.spec.startswith(baselines.PREFIX) else ""
        if self.sweep is not None:
            return f"{head}{extra} (sweep {self.sweep.name}: {len(self.sweep.configs)} configs × {len(self.sweep.scenarios)} scenarios)"
        n_req = sum(r.summary.requests.completed for r in self.runs)
        runs = f"{len(self.runs)} runs" if len(self.runs) > 1 else "1 run"
        return f"{head}{extra} ({runs}, {n_req:,} requests)"


def load_side(spec: str, role: str, baseline_root: Path | None = None) -> Side:
    # a directory whose name holds a comma is one side, not a list (older sweeps named cells
    # `flag=a,flag=b`); otherwise a comma separates run directories
    specs = [spec] if "," in spec and Path(spec).is_dir() else [s for s in spec.split(",") if s.strip()]
    if not specs:
        raise UserError(f"{role}: empty; pass a run directory, a sweep directory or baseline:<name>")
    paths = [baselines.resolve(s.strip(), baseline_root) for s in specs]
    side = Side(spec=spec, role=role, paths=paths)
    for p in paths:
        if not p.is_dir():
            raise UserError(
                f"{role} {p}: no such directory; pass a run directory, a sweep directory or baseline:<name>"
            )
        kind = kind_of(p)
        if kind == "sweep":
            if len(paths) > 1:
                raise UserError(
                    f"{role} {spec}: a sweep directory cannot be listed with others; compare one sweep with one sweep"
                )
            side.sweep = load_sweep(p)
        elif kind == "run":
            side.runs.append(load_run(p))
        elif kind == "group":
            side.runs.extend(load_run(d) for d in run_subdirs(p))
        else:
            raise UserError(
                f"{role} {p}: not a run directory (summary.json), a folder of run directories, or a sweep directory (index.json)"
            )
    return side


# ---------------------------------------------------------------- options and results


@dataclass
class Pair:
    label: str  # "" for a run comparison; "config × scenario" in sweeps
    status: str  # compared | candidate failed | missing in candidate | baseline failed | ...
    fingerprint: str
    rows: list[Row] = field(default_factory=list)
    note: str = ""

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == "REGRESSION"]

    @property
    def failed(self) -> bool:
        return self.status == "candidate failed"


@dataclass
class Result:
    baseline: str
    candidate: str
    options: Options
    pairs: list[Pair]
    how: list[str]
    warnings: list[str] = field(default_factory=list)
    #: (label, baseline run dir, candidate run dir) of every compared pair: where quality outputs may be
    quality_dirs: list[tuple[str, Path, Path]] = field(default_factory=list)
    #: quality verdicts where both sides hold greedy outputs, filled by harness.quality.compare
    #: (above this layer): objects with .label, .failed, .short(), .lines(), .to_json()
    quality: list[Any] = field(default_factory=list)

    @property
    def quality_failures(self) -> list[Any]:
        return [q for q in self.quality if q.failed]

    @property
    def regressions(self) -> list[tuple[Pair, Row]]:
        return [(p, r) for p in self.pairs for r in p.regressions]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions or any(p.failed for p in self.pairs) or self.quality_failures else 0

    def verdict_line(self) -> str:
        """The latency verdict, then the quality verdict beside it (when both sides have outputs)."""
        regs = self.regressions
        failed = [p for p in self.pairs if p.failed]
        if not regs and not failed:
            head = (
                "FAIL: latency and throughput: no regression"
                if self.quality_failures
                else "PASS: no regression beyond the threshold and the noise"
            )
            return head + self.quality_line()
        parts = []
        if regs:
            names = ", ".join(f"{p.label + ': ' if p.label else ''}{r.label}" for p, r in regs[:8])
            more = f" and {len(regs) - 8} more" if len(regs) > 8 else ""
            parts.append(f"{len(regs)} regression{'s' if len(regs) != 1 else ''} ({names}{more})")
        if failed:
            parts.append(
                f"{len(failed)} cell{'s' if len(failed) != 1 else ''} failed in the candidate but not in the baseline ({', '.join(p.label for p in failed)})"
            )
        return "FAIL: " + "; ".join(parts) + self.quality_line()

    def quality_line(self) -> str:
        """`; quality PASS|FAIL (...)`, empty when neither side has greedy outputs."""
        if not self.quality:
            return ""
        bad = self.quality_failures
        cells = ", ".join(f"{q.label + ': ' if q.label else ''}{q.short()}" for q in self.quality)
        return f"; quality {'FAIL' if bad else 'PASS'} ({cells})"

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "options": asdict(self.options),
            "verdict": self.verdict_line(),
            "exit_code": self.exit_code,
            "how": self.how,
            "warnings": self.warnings,
            "quality": [q.to_json() for q in self.quality],
            "pairs": [
                {
                    "label": p.label,
                    "status": p.status,
                    "fingerprint": p.fingerprint,
                    "note": p.note,
                    "rows": [asdict(r) for r in p.rows],
                }
                for p in self.pairs
            ],
        }
