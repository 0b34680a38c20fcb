"""Offline mode's client limit: how many requests one load process puts in flight at once before
the client, not the engine, sets the result.

For each N, `harness run --offline --requests N` against the simulated engine (one process per
N, `--max-num-seqs` above N so the engine admits everything, a slow step so the engine's work
dwarfs the client's): the submit spread (first to last send), the peak in flight, the client's
CPU, the makespan, and whether the run flagged itself client-limited (fewer than 90% in flight at
once, or sends spread over >20% of the makespan). Prints a table, writes JSON.

    python bench/offline_client.py                        # N = 250 ... 4000 (a few minutes)
    python bench/offline_client.py --n 1000 2000 4000 8000 --processes 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--sim-speed", type=float, default=0.25, help="simulator speed (lower: longer steps)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "offline_client.json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="offline-bench-"))
    scen = {
        "name": "offline-bench",
        "seed": 0,
        "load": {"offline": True, "requests": 1},
        "warmup": {"requests": 0},
        "workload": {"classes": [{"name": "c", "input_tokens": 16, "output_tokens": args.output_tokens}]},
        "telemetry": {"enabled": False},
    }
    (work / "s.yaml").write_text(yaml.safe_dump(scen))
    rows = []
    for n in args.n:
        out = work / f"n{n}"
        sim = f"--max-num-seqs {n + 8} --max-num-batched-tokens {max(8192, 16 * (n + 8))} --sim-speed {args.sim_speed} --disable-log-stats"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "run",
                str(work / "s.yaml"),
                "--requests",
                str(n),
                "--out",
                str(out),
                "--quiet",
                "--no-report",
                "--processes",
                str(args.processes),
                "--sim-args",
                sim,
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=900,
        )
        try:
            s = json.loads((out / "summary.json").read_text())
        except (OSError, ValueError):
            rows.append({"n": n, "error": (proc.stderr or proc.stdout)[-300:]})
            continue
        off = s["load"].get("offline") or {}
        rows.append(
            {
                "n": n,
                "completed": s["requests"]["completed"],
                "failed": s["requests"]["failed"],
                "submit_spread_s": off.get("submit_spread_s"),
                "peak_in_flight": off.get("peak_in_flight"),
                "makespan_s": off.get("makespan_s"),
                "req_per_s": off.get("req_per_s"),
                "client_cpu_max_pct": s["client"].get("cpu_max_pct"),
                "client_limited": off.get("client_limited"),
            }
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"processes": args.processes, "sim_speed": args.sim_speed, "rows": rows}, indent=2) + "\n"
    )
    print(f"{'N':>6}{'spread s':>10}{'peak':>7}{'makespan s':>12}{'req/s':>9}{'cpu %':>7}  client limited")
    for r in rows:
        if "error" in r:
            print(f"{r['n']:>6}  error: {r['error']}")
            continue
        print(
            f"{r['n']:>6}{r['submit_spread_s'] or 0:>10.2f}{r['peak_in_flight']:>7}{r['makespan_s']:>12.2f}{r['req_per_s'] or 0:>9.1f}"
            f"{r['client_cpu_max_pct'] or 0:>7.0f}  {r['client_limited'] or 'no'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
