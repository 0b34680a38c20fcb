"""Tune vs a full grid: engine starts and engine-minutes, and whether both reach the same answer.

For a finished tune directory, the grid is every combination of the values the procedure had for
each flag it could change on this case: the current value plus the values the step tried or
would try (max-num-seqs: the values it derived; max-num-batched-tokens: 512 and 2048; prefix
caching: on and off; speculative-config: none and the tune file's candidates). The grid runs as a
normal sweep (`vary.mode: grid`) with the tune's window, warmup and expected load, one engine
start per config; its answer is the config with the highest goodput among those without a
preemption storm (ties broken by fewer flags changed). Engine time = startup + cell wall time,
from each index.json.

    python bench/tune_vs_grid.py results/tune/storm            # run the grid for this tune dir
    python bench/tune_vs_grid.py results/tune/storm --plan     # print the grid, run nothing
    python bench/tune_vs_grid.py results/tune/storm --estimate # grid time from the tune's per-start cost
    python bench/tune_vs_grid.py --table bench/results/tune_vs_grid.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.sweep.flags import flag_key

DEFAULT_VALUES: dict[str, list[Any]] = {
    "max-num-batched-tokens": [512, 2048],
    "enable-prefix-caching": [True, False],
}


def engine_seconds(index: dict[str, Any]) -> tuple[int, float]:
    starts: dict[str, float] = {}
    cells = 0.0
    for e in index.get("cells", []):
        if e.get("startup_s") is not None:
            starts.setdefault(e["config_id"], float(e["startup_s"]))
        cells += float(e.get("duration_s") or 0.0)
    return len(starts), sum(starts.values()) + cells


def _add(values: list[Any], v: Any) -> None:
    if json.dumps(v, sort_keys=True) not in {json.dumps(x, sort_keys=True) for x in values}:
        values.append(v)


def grid_values(tune: dict[str, Any], tune_file: dict[str, Any]) -> dict[str, list[Any]]:
    """Per flag: the current value, then every value a step tried or derived, then the steps' default values."""
    base = {flag_key(k): v for k, v in (tune_file.get("base") or {}).items()}
    values: dict[str, list[Any]] = {}
    for step in tune["steps"]:
        for t in step.get("tried", []):
            for k, v in (t.get("flags") or {}).items():
                k = flag_key(k)
                if k != "max-model-len" and base.get(k) != v:
                    _add(values.setdefault(k, [base.get(k)]), v)
        # values a step derived but did not need to start (the guide's formula decided first, or
        # its precondition did not hold): a grid has no such shortcut and runs them all
        if step["step"] in ("max-num-seqs", "max-num-batched-tokens"):
            d = step.get("details") or {}
            for v in [*(d.get("candidates") or []), *(d.get("formula") or [])]:
                if base.get(step["step"]) != v:
                    _add(values.setdefault(step["step"], [base.get(step["step"])]), v)
    for k, defaults in DEFAULT_VALUES.items():
        cur = base.get(k, True if k == "enable-prefix-caching" else None)
        for v in defaults:
            _add(values.setdefault(k, [cur]), v)
    for k, vs in values.items():  # the current value first, the rest in order (a stable grid)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in vs[1:]):
            values[k] = [vs[0], *sorted(vs[1:])]
    spec = (tune_file.get("candidates") or {}).get("speculative-config")
    if spec or "speculative-config" in base:
        for v in [None, *(spec or [])]:
            _add(values.setdefault("speculative-config", [base.get("speculative-config")]), v)
    return values


def grid_sweep(tune_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    tune = json.loads((tune_dir / "tune.json").read_text())
    tune_file = yaml.safe_load((tune_dir / "tune.yaml").read_text())
    src = Path(tune["tune_file"]).parent
    values = grid_values(tune, tune_file)
    base = dict(tune_file.get("base") or {})
    mml = (tune["final"]["flags"] or {}).get("max-model-len")
    if mml:
        base["max-model-len"] = mml
    for k in values:
        base.pop(k, None)
    measure = tune_file.get("measure") or {}
    load = tune_file["load"]
    path = "load.concurrency" if "concurrency" in load else "load.rate"
    sweep = {
        "name": f"grid-{tune['name']}"[:60],
        "engine": tune_file["engine"],
        "base": base,
        "vary": {"mode": "grid", "flags": values},
        "scenarios": [str((src / w).resolve()) for w in tune_file["workload"]],
        "overrides": {"load.duration_s": measure.get("duration_s", 60)},
        "loads": {path: [load.get("concurrency") or load.get("rate")]},
        "warmup": {"duration_s": measure.get("warmup_s", 10)},
    }
    return sweep, tune


def grid_answer(index: dict[str, Any]) -> dict[str, Any] | None:
    rows = []
    for e in index.get("cells", []):
        if e.get("status") != "complete":
            continue
        m = e.get("metrics") or {}
        pre, done = m.get("preemptions") or 0, m.get("completed") or 0
        storm = bool(done and pre / done >= 0.1)
        rows.append(
            (not storm, m.get("goodput_req_per_s") or m.get("req_per_s") or 0.0, -len(e.get("varied") or {}), e)
        )
    if not rows:
        return None
    rows.sort(key=lambda r: (r[0], r[1], r[2]), reverse=True)
    return rows[0][3]


def same_answer(tune_flags: dict[str, Any], grid_flags: dict[str, Any], keys: list[str]) -> bool:
    t = {flag_key(k): v for k, v in tune_flags.items()}
    g = {flag_key(k): v for k, v in grid_flags.items()}
    # a flag left unset is the engine's default: prefix caching unset is prefix caching on
    defaults = {"enable-prefix-caching": True}
    return all(t.get(k, defaults.get(k)) == g.get(k, defaults.get(k)) for k in keys)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tune_dirs", nargs="*", type=Path)
    ap.add_argument("--plan", action="store_true", help="print each grid, run nothing")
    ap.add_argument(
        "--estimate",
        action="store_true",
        help="do not run the grid: its engine time = configs x the tune's mean engine seconds per start "
        "(every start has the same warmup and window); the answers are not compared",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tune_vs_grid.json")
    ap.add_argument("--table", type=Path, metavar="FILE", help="print the rows of this results file, run nothing")
    args = ap.parse_args()
    if args.table:  # the docstring's promise: print a results file's rows (was: unrecognized argument)
        args.out, args.plan, args.tune_dirs = args.table, True, []
    rows = json.loads(args.out.read_text()) if args.out.is_file() else {}
    for tune_dir in args.tune_dirs:
        sweep, tune = grid_sweep(tune_dir)
        n = len(list(itertools.product(*sweep["vary"]["flags"].values())))
        print(
            f"{tune['name']}: grid over {', '.join(f'{k} {v}' for k, v in sweep['vary']['flags'].items())} = {n} configs"
        )
        if args.plan:
            continue
        if args.estimate:
            t_starts, t_s = tune["cost"]["engine_starts"], tune["cost"]["engine_s"]
            g_s = n * t_s / t_starts
            rows[tune["name"]] = {
                "grid_configs": n,
                "grid_starts": n,
                "grid_engine_min": round(g_s / 60, 2),
                "grid": "estimated",
                "tune_starts": t_starts,
                "tune_engine_min": round(t_s / 60, 2),
                "ratio": round(t_s / g_s, 3),
                "tune_answer": {k: tune["final"]["flags"].get(k) for k in sweep["vary"]["flags"]},
                "grid_answer": None,
                "same_answer": None,
            }
            print(json.dumps(rows[tune["name"]]))
            continue
        grid_dir = tune_dir / "grid"
        grid_file = tune_dir / "grid.yaml"
        grid_file.write_text(yaml.safe_dump(sweep, sort_keys=False))
        cmd = [sys.executable, "-m", "harness.cli.main", "sweep", str(grid_file), "--no-report", "--quiet"]
        cmd += ["--resume", str(grid_dir)] if (grid_dir / "index.json").is_file() else ["--out", str(grid_dir)]
        subprocess.run(cmd, check=False, cwd=ROOT)
        index = json.loads((grid_dir / "index.json").read_text())
        g_starts, g_s = engine_seconds(index)
        t_starts, t_s = tune["cost"]["engine_starts"], tune["cost"]["engine_s"]
        best = grid_answer(index)
        keys = list(sweep["vary"]["flags"])
        same = best is not None and same_answer(tune["final"]["flags"], best["flags"], keys)
        rows[tune["name"]] = {
            "grid_configs": n,
            "grid_starts": g_starts,
            "grid_engine_min": round(g_s / 60, 2),
            "tune_starts": t_starts,
            "tune_engine_min": round(t_s / 60, 2),
            "ratio": round(t_s / g_s, 3) if g_s else None,
            "tune_answer": {k: tune["final"]["flags"].get(k) for k in keys},
            "grid_answer": {k: (best or {}).get("flags", {}).get(k) for k in keys},
            "same_answer": same,
        }
        print(json.dumps(rows[tune["name"]]))
    if not args.plan:  # (--estimate rows are written too, marked "grid": "estimated")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    for name, r in rows.items():
        print(
            f"{name:<22} tune {r['tune_starts']} starts {r['tune_engine_min']:.1f} engine-min | grid {r['grid_starts']} starts "
            f"{r['grid_engine_min']:.1f} engine-min{' (estimated)' if r.get('grid') == 'estimated' else ''} | tune/grid {r['ratio']} | "
            f"same answer: {r['same_answer']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
