"""What a sweep directory's index entries mean to everything that reads them after the sweep.

The executor (harness.sweep) writes index.json (harness.results.models.sweep); the report, tune and
capacity planning read it. The readings both sides share live here, one layer below both, so the
report never imports the sweep executor (harness/sweep/results.py re-exports them for the sweep's
own tables).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.results.models.sweep import Cell

#: share of requests within the SLOs that makes a load level count as carried (sweep slo_attainment)
DEFAULT_ATTAINMENT = 0.95
#: guide 001 3.2: "1.5-2.5x decode speedup when acceptance rate exceeds 70%. Below 50% acceptance,
#: speculative decoding hurts." A speculating config below it is never crowned best.
MIN_SPEC_ACCEPTANCE = 0.5


def low_acceptance(rate: float | None) -> str | None:
    """Why a speculative config below 50% acceptance is not ranked (None: at or above it, or no speculation)."""
    if rate is None or rate >= MIN_SPEC_ACCEPTANCE:
        return None
    return (
        f'speculative acceptance {100 * rate:.0f}% is below 50% (guide 001: "Below 50% acceptance, speculative '
        'decoding hurts"): shown, not ranked'
    )


def scenario_label(scenario: str, load_level: str | None = None) -> str:
    """What a cell ran, for grouping and tables: the scenario, and its load level when the sweep
    has `loads` (configs are compared at equal load only)."""
    return f"{scenario} @ {load_level}" if load_level else scenario


def cell_label(cell: Cell) -> str:
    return scenario_label(cell.scenario, cell.load_level)


def load_value(cell: Cell) -> float | None:
    """The cell's load level as a number (`loads` sweeps), None without one."""
    return float(next(iter(cell.load.values()))) if cell.load else None


@dataclass(frozen=True)
class Level:
    level: str  # the load level's label: "concurrency=8"
    good_fraction: float  # mean share of requests within the SLOs over the complete repeats


@dataclass(frozen=True)
class CapacityRow:
    config_id: str
    held: Level | None  # the highest level carried, with every lower one (None: not even the first)
    broke: Level | None  # the first level that was not


def capacity(entries: list[Cell], attainment: float = DEFAULT_ATTAINMENT) -> dict[str, list[CapacityRow]]:
    """Sweeps with `loads`: per scenario file and config, the highest load level at which that level
    and every lower one kept at least `attainment` of requests within the SLOs (mean over complete
    repeats), and the first level that did not. The answer to "how much load does this config carry
    within the SLOs", the number a capacity plan needs. Empty without load levels or without SLOs."""
    groups: dict[str, dict[str, dict[float, list[float]]]] = {}
    labels: dict[float, str] = {}
    for e in entries:
        value = load_value(e)
        if value is None or e.status != "complete":
            continue
        labels[value] = str(e.load_level or value)
        frac = e.metrics.goodput_fraction
        per_level = groups.setdefault(e.scenario, {}).setdefault(e.config_id, {})
        per_level.setdefault(value, [])
        if frac is not None:
            per_level[value].append(float(frac))
    out: dict[str, list[CapacityRow]] = {}
    for scenario, configs in groups.items():
        rows = []
        for config_id, levels in configs.items():
            if any(not fracs for fracs in levels.values()):
                continue  # no goodput (no SLO set): nothing to judge
            held, broke = None, None
            for value in sorted(levels):
                frac = sum(levels[value]) / len(levels[value])
                if frac >= attainment:
                    held = Level(labels[value], frac)
                else:
                    broke = Level(labels[value], frac)
                    break
            rows.append(CapacityRow(config_id, held, broke))
        if rows:
            out[scenario] = rows
    return out


def top_level(entries: list[Cell], config_id: str) -> str | None:
    """The highest load level a config completed (by value): held there, it may carry more."""
    done = [
        (v, e.load_level)
        for e in entries
        if e.config_id == config_id and e.status == "complete" and (v := load_value(e)) is not None
    ]
    return max(done, key=lambda d: d[0])[1] if done else None
