"""The regression gate's false alarms and its power, measured on the simulated engine.

Each round runs three `harness run`s back to back with the same scenario (each starts its own
embedded simulator): A, A again (same config), and B on a 10% slower engine (`--sim-speed 0.9`:
every step takes 1/0.9 = 1.11x as long). Then, at `harness compare`'s default settings:

- A/A: `harness compare A A2` must pass: any REGRESSION is a false alarm (target: at most 1 of 20);
- A/B: `harness compare A B` must fail (target: caught in at least 19 of 20).

The run directories are kept, so the comparison half can be re-run on the same runs after a
change to the statistics (`--compare-only DIR`). Figures go to docs/reports.md.

    python bench/gate_false_alarms.py --rounds 20 --out results/gate-bench
    python bench/gate_false_alarms.py --compare-only results/gate-bench
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SLOWER = "--sim-speed 0.9"


def harness(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def run_round(out: Path, i: int, scenario: str, duration: float | None) -> None:
    extra = ["--duration", f"{duration:g}"] if duration else []
    for name, sim in (("a", None), ("a2", None), ("b", SLOWER)):
        d = out / f"r{i:02d}-{name}"
        if (d / "summary.json").is_file():
            continue
        argv = ["run", scenario, "--out", str(d), "--quiet", "--force", *extra]
        if sim:
            argv += ["--sim-args", sim]
        t0 = time.time()
        p = harness(*argv)
        print(f"  round {i} {name}: rc {p.returncode} in {time.time() - t0:.0f} s", flush=True)
        if p.returncode not in (0, 1):
            print(p.stderr[-2000:], file=sys.stderr)


def compare(a: Path, b: Path) -> dict:
    p = harness("compare", str(a), str(b), "--json")
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"exit_code": p.returncode, "error": p.stderr[-500:]}
    rows = [r for pair in doc["pairs"] for r in pair["rows"]]
    return {
        "exit_code": doc["exit_code"],
        "regressions": [
            f"{r['label']} {r['change']:+.1f}% [{r['interval'][0]:+.1f}, {r['interval'][1]:+.1f}]"
            + (f" p_adj={r['p_adjusted']:.2g}" if r.get("p_adjusted") is not None else "")
            for r in rows
            if r["verdict"] == "REGRESSION" and r.get("interval")
        ]
        + [r["label"] for r in rows if r["verdict"] == "REGRESSION" and not r.get("interval")],
        "unadjusted_beyond": sum(
            1
            for r in rows
            if r.get("interval")
            and r.get("change") is not None
            and abs(r["worse_by"] or 0) > 5
            and (r["interval"][0] > 0 or r["interval"][1] < 0)
            and (r["worse_by"] or 0) > 0
        ),
    }


def tabulate(out: Path, result_path: Path | None = None) -> dict:
    rounds = sorted({p.name.split("-")[0] for p in out.glob("r*-a") if (p / "summary.json").is_file()})
    aa, ab = [], []
    for r in rounds:
        a, a2, b = out / f"{r}-a", out / f"{r}-a2", out / f"{r}-b"
        if not all((d / "summary.json").is_file() for d in (a, a2, b)):
            continue
        aa.append({"round": r, **compare(a, a2)})
        ab.append({"round": r, **compare(a, b)})
        print(
            f"{r}: A/A exit {aa[-1]['exit_code']} {aa[-1].get('regressions') or ''} | "
            f"A/B exit {ab[-1]['exit_code']} {ab[-1].get('regressions', [])[:3]}",
            flush=True,
        )
    result = {
        "rounds": len(aa),
        "false_alarms": sum(1 for x in aa if x["exit_code"] == 1),
        "caught": sum(1 for x in ab if x["exit_code"] == 1),
        "aa_rounds_with_an_unadjusted_95pct_alarm": sum(1 for x in aa if x.get("unadjusted_beyond")),
        "aa": aa,
        "ab": ab,
    }
    (result_path or out / "gate_false_alarms.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"A/A false alarms: {result['false_alarms']} of {result['rounds']}; 10%-slower engine caught: "
        f"{result['caught']} of {result['rounds']}; A/A rounds where some metric's unadjusted 95% interval "
        f"excluded zero beyond 5%: {result['aa_rounds_with_an_unadjusted_95pct_alarm']}"
    )
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--scenario", default="scenarios/mixed.yaml")
    ap.add_argument("--duration", type=float, default=None, help="override the scenario's window (s)")
    ap.add_argument("--out", type=Path, default=Path("results/gate-bench"))
    ap.add_argument("--compare-only", type=Path, default=None, help="tabulate the runs already in DIR")
    ap.add_argument(
        "--result", type=Path, default=None, help="where the figures go (default DIR/gate_false_alarms.json)"
    )
    args = ap.parse_args()
    if args.compare_only:
        tabulate(args.compare_only, args.result)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for i in range(1, args.rounds + 1):
        run_round(args.out, i, args.scenario, args.duration)
    tabulate(args.out, args.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
