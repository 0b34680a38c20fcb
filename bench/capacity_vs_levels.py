"""Capacity search vs a fixed list of 8 load levels: trials, wall time and the answer each gives.

Both run against the same simulated engine (one process, started once) with the same scenario
(`scenarios/capacity_search.yaml` by default, `--sim-args "--max-num-seqs 4"`): the search
brackets and bisects to a 5% precision with early stop of over-saturated trials
(`harness capacity`); the list runs 8 levels spread geometrically over the same range the
search bracketed (start to 8x start), every trial to the end of its window, as a sweep's
`loads` would. The list's answer is its highest level that held the SLOs; its precision is the
gap to the next level. Prints a table and writes JSON.

    python bench/capacity_vs_levels.py                      # ~5-10 minutes on 2 shared cores
    python bench/capacity_vs_levels.py --duration 6 --out bench/results/capacity_vs_levels.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.capacity.search import TrialSettings, run_trial, scenario_at, search_capacity
from harness.run.provider import TargetProvider
from harness.scenario.loader import load_scenario


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default=str(ROOT / "scenarios" / "capacity_search.yaml"))
    ap.add_argument("--sim-args", default="--max-num-seqs 4 --disable-log-stats")
    ap.add_argument("--duration", type=float, default=None, help="window of every trial (default: the scenario's)")
    ap.add_argument("--levels", type=int, default=8)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "capacity_vs_levels.json")
    args = ap.parse_args()
    scenario = load_scenario(args.scenario)
    if args.duration:
        scenario = scenario.model_copy(update={"load": scenario.load.model_copy(update={"duration_s": args.duration})})
    start = scenario.load.rate or float(scenario.load.concurrency or 1)
    knob: Literal["rate", "concurrency"] = "rate" if scenario.load.rate is not None else "concurrency"
    work = Path(tempfile.mkdtemp(prefix="capbench-"))
    with TargetProvider(shlex.split(args.sim_args), work) as targets:  # the one place a simulator starts
        sim = targets.start(scenario)
        t0 = time.monotonic()
        res = search_capacity(scenario, work / "search", settings=TrialSettings(target_url=sim.url))
        search_wall = time.monotonic() - t0
        top = 8 * start
        levels = [round(start * (top / start) ** (i / (args.levels - 1)), 3) for i in range(args.levels)]
        t0 = time.monotonic()
        held = []
        for i, level in enumerate(levels):
            trial = run_trial(
                scenario_at(scenario, knob, level),
                knob,
                level,
                work / f"list-{i:02d}",
                TrialSettings(target_url=sim.url, early_stop=False),
            )
            held.append((level, trial.score >= 0.95, trial.attainment))  # no fit: a list is read as measured
        list_wall = time.monotonic() - t0
    passing = [lv for lv, ok, _ in held if ok]
    best = max(passing) if passing else None
    nxt = next((lv for lv in levels if best is not None and lv > best), None)
    doc = {
        "scenario": args.scenario,
        "sim_args": args.sim_args,
        "window_s": scenario.load.duration_s,
        "search": {
            "trials": len(res.trials),
            "saturated_stopped_early": res.saturated_trials,
            "wall_s": round(search_wall, 1),
            "boundary": res.boundary,
            "first_failing": res.first_failing,
            "relative_gap": res.relative_gap,
            "trial_levels": [t.level for t in res.trials],
        },
        "list": {
            "trials": len(levels),
            "wall_s": round(list_wall, 1),
            "levels": levels,
            "boundary": best,
            "first_failing": nxt,
            "relative_gap": None if best is None or nxt is None else round((nxt - best) / nxt, 3),
            "attainment": [a for _, _, a in held],
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"{'method':<26}{'trials':>7}{'wall s':>9}{'boundary':>10}{'first fail':>12}{'gap':>8}")
    for name, d in (("search (5%, early stop)", doc["search"]), (f"fixed {len(levels)}-level list", doc["list"])):
        gap = "-" if d["relative_gap"] is None else f"{100 * d['relative_gap']:.1f}%"
        print(
            f"{name:<26}{d['trials']:>7}{d['wall_s']:>9}{d['boundary'] or '-':>10}{d['first_failing'] or '-':>12}{gap:>8}"
        )
    print(f"(search stopped {doc['search']['saturated_stopped_early']} saturated trial(s) early; JSON: {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
