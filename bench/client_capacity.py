"""Client capacity: token events/s the harness delivers at the fidelity target, by client processes.

Method: bench/tick_server.py (ground truth, see bench/fidelity.py) streams one token per SSE event
to every open stream on each tick (ITL apart, like batched decoding). `harness run` measures it
closed-loop at C streams, for a ladder of C, with 1 process, 2 independent processes
(`--processes 2`) and a Locust master with 2 workers (`--distributed 2`). A case passes when the
per-gap ITL error |measured - truth| has p99 <= the target (1 ms). Capacity = the most token
events/s delivered by a passing case. The server is pinned to core 0; one client process to core
1; two client processes are not pinned (this machine has 2 cores, so they share with the server).

    python bench/client_capacity.py                      # the default ladder, all three configs
    python bench/client_capacity.py --streams 64,128 --configs 1,d2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from fidelity import measure, pct  # the same ground-truth server and join

CONFIGS = {
    "1": ("1 process", []),
    "p2": ("2 processes (independent)", ["--processes", "2"]),
    "d2": ("master + 2 workers", ["--distributed", "2"]),
}


def run_case(streams: int, itl_ms: float, tokens: int, rounds: int, extra: list[str], pin_client: bool) -> dict:
    can_pin = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
    m = measure(
        streams,
        itl_ms,
        tokens,
        30.0,
        rounds,
        "0" if can_pin else None,
        "1" if (can_pin and pin_client) else None,
        extra,
        prefix="cap",
    )
    summary, truth, ticker, wall = m["summary"], m["truth"], m["ticker"], m["wall_s"]
    errs: list[float] = []
    events = 0
    for r in m["requests"]:  # every load process's request lines
        t = truth.get(r["id"])
        if r["warmup"] or r["error"] or t is None:
            continue
        gaps_truth = np.diff(t["writes"]) / 1e6
        gaps_meas = np.diff(r["chunk_offsets_us"]) / 1e3
        events += len(r["chunk_offsets_us"])
        if len(gaps_truth) == len(gaps_meas):
            errs.extend(np.abs(gaps_meas - gaps_truth).tolist())
    window = summary["window"]["duration_s"] or float("nan")
    row = {
        "streams": streams,
        "offered_ev_s": streams * 1000.0 / itl_ms,
        "delivered_ev_s": events / window,
        "itl_err_p50_ms": pct(errs, 50),
        "itl_err_p99_ms": pct(errs, 99),
        "client_cpu_max": summary["client"]["cpu_max_pct"],
        "coalesced": summary["timing"]["coalesced_reads"],
        "server_late_p99_ms": ticker.get("ticker_late_p99_ns", 0) / 1e6,
        "requests": summary["requests"]["completed"],
        "wall_s": wall,
    }
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="1,p2,d2", help=f"comma-separated, of {', '.join(CONFIGS)}")
    p.add_argument("--streams", default="32,64,128,192,256,384", help="ladder of concurrent streams")
    p.add_argument("--itl-ms", type=float, default=10.0, help="server tick (one token per stream per tick)")
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--target-ms", type=float, default=1.0, help="fidelity target: per-gap ITL |error| p99")
    p.add_argument("--json", help="also write every row here")
    args = p.parse_args()
    ladder = [int(x) for x in args.streams.split(",")]
    results: dict[str, list[dict]] = {}
    print(
        f"{'config':<26} {'C':>4} {'offered ev/s':>12} {'delivered':>10} {'ITL |err| p50':>13} {'p99 ms':>7} "
        f"{'cpu%':>5} {'coal':>6} {'srv late p99':>12}  pass"
    )
    for key in args.configs.split(","):
        label, extra = CONFIGS[key]
        rows = results.setdefault(key, [])
        fails = 0
        for c in ladder:
            row = run_case(c, args.itl_ms, args.tokens, args.rounds, extra, pin_client=(key == "1"))
            row["pass"] = row["itl_err_p99_ms"] <= args.target_ms
            rows.append(row)
            print(
                f"{label:<26} {c:>4} {row['offered_ev_s']:>12,.0f} {row['delivered_ev_s']:>10,.0f} "
                f"{row['itl_err_p50_ms']:>13.3f} {row['itl_err_p99_ms']:>7.3f} {row['client_cpu_max'] or 0:>5.0f} "
                f"{row['coalesced']:>6} {row['server_late_p99_ms']:>12.2f}  {'yes' if row['pass'] else 'no'}",
                flush=True,
            )
            fails += not row["pass"]
            if fails >= 2:
                break  # past the knee
    print(
        f"\nclient capacity at ITL |error| p99 <= {args.target_ms:g} ms (token events/s delivered, best passing case):"
    )
    for key, rows in results.items():
        ok = [r for r in rows if r["pass"]]
        best = max(ok, key=lambda r: r["delivered_ev_s"]) if ok else None
        text = f"{best['delivered_ev_s']:,.0f} ev/s at {best['streams']} streams" if best else "no case passed"
        print(f"  {CONFIGS[key][0]:<26} {text}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
