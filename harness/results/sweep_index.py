"""What a sweep directory's index entries mean to everything that reads them after the sweep.

The executor (harness.sweep) writes index.json; the report, tune and capacity planning read it.
The readings both sides share live here, one layer below both, so the report never imports the
sweep executor (harness/sweep/results.py re-exports them for the sweep's own tables).
"""

from __future__ import annotations

from typing import Any

#: share of requests within the SLOs that makes a load level count as carried (sweep slo_attainment)
DEFAULT_ATTAINMENT = 0.95


def scenario_label(entry: dict[str, Any]) -> str:
    """What a cell ran, for grouping and tables: the scenario, and its load level when the sweep
    has `loads` (configs are compared at equal load only)."""
    level = entry.get("load_level")
    return f"{entry['scenario']} @ {level}" if level else str(entry["scenario"])


def capacity(entries: list[dict[str, Any]], attainment: float = DEFAULT_ATTAINMENT) -> dict[str, list[dict[str, Any]]]:
    """Sweeps with `loads`: per scenario file and config, the highest load level at which that level
    and every lower one kept at least `attainment` of requests within the SLOs (mean over complete
    repeats), and the first level that did not. The answer to "how much load does this config carry
    within the SLOs", the number a capacity plan needs. Empty without load levels or without SLOs."""
    groups: dict[str, dict[str, dict[float, list[float]]]] = {}
    labels: dict[float, str] = {}
    for e in entries:
        load = e.get("load") or {}
        if not load or e.get("status") != "complete":
            continue
        value = float(next(iter(load.values())))
        labels[value] = str(e.get("load_level") or value)
        frac = (e.get("metrics") or {}).get("goodput_fraction")
        per_level = groups.setdefault(str(e["scenario"]), {}).setdefault(str(e["config_id"]), {})
        per_level.setdefault(value, [])
        if isinstance(frac, (int, float)):
            per_level[value].append(float(frac))
    out: dict[str, list[dict[str, Any]]] = {}
    for scenario, configs in groups.items():
        rows = []
        for config_id, levels in configs.items():
            if any(not fracs for fracs in levels.values()):
                continue  # no goodput (no SLO set): nothing to judge
            held, broke = None, None
            for value in sorted(levels):
                frac = sum(levels[value]) / len(levels[value])
                if frac >= attainment:
                    held = {"level": labels[value], "good_fraction": frac}
                else:
                    broke = {"level": labels[value], "good_fraction": frac}
                    break
            rows.append({"config_id": config_id, "held": held, "broke": broke})
        if rows:
            out[scenario] = rows
    return out


def top_level(entries: list[dict[str, Any]], config_id: str) -> str | None:
    """The highest load level a config completed (by value): held there, it may carry more."""
    done = [(float(next(iter(e["load"].values()))), e.get("load_level")) for e in entries
            if e.get("config_id") == config_id and e.get("status") == "complete" and isinstance(e.get("load"), dict) and e["load"]]
    return max(done)[1] if done else None
