"""Client-timing fidelity: the harness's TTFT/ITL against a server's ground truth.

Method (PEERS.md §7): bench/tick_server.py writes one token per SSE event on a batched-decoding
schedule and logs when it actually wrote each one. `harness run` measures it closed-loop at
C streams. Truth: TTFT = first content write - request receipt; ITL = gaps between writes.
We report (a) reported percentile - truth percentile, as the peers were measured, and (b) the
per-request / per-gap error after joining on X-Request-Id. Server on core 0, harness on core 1.

    python bench/fidelity.py                  # the issue's cases: C = 1, 32, 128, 512 at 10 ms + capacity
    python bench/fidelity.py --cases 128:10   # C:ITL_ms pairs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.metrics import percentile  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values, q):  # type: ignore[no-untyped-def]
    v = percentile.of_values(values, q)  # nearest rank, as the harness's own figures
    return float("nan") if v is None else v


def measure(streams: int, itl_ms: float, tokens: int, ttft_ms: float, rounds: int, server_cores: str | None,
            client_cores: str | None, extra: list[str], prefix: str = "fid") -> dict:
    """Run the tick server and `harness run` against it; return the summary, the server's truth
    per request id, the harness's request lines and the ticker lateness. Shared with
    bench/client_capacity.py."""
    work = Path(tempfile.mkdtemp(prefix=f"{prefix}{streams}_"))
    port = free_port()
    trace = work / "trace.jsonl"
    pin0 = ["taskset", "-c", server_cores] if server_cores else []
    pin1 = ["taskset", "-c", client_cores] if client_cores else []
    server = subprocess.Popen(
        [*pin0, sys.executable, str(ROOT / "bench" / "tick_server.py"), "--port", str(port), "--ttft-ms", str(ttft_ms),
         "--itl-ms", str(itl_ms), "--trace", str(trace)],
        stdout=subprocess.PIPE, text=True,
    )
    assert server.stdout is not None
    server.stdout.readline()
    scenario = work / "scenario.yaml"
    scenario.write_text(json.dumps({
        "name": f"{prefix}-c{streams}",
        "load": {"concurrency": streams, "requests": streams * rounds},
        "warmup": {"requests": streams},
        "telemetry": {"enabled": False},
        "target": {"continuous_usage": "off"},
        "workload": {"classes": [{"name": "fixed", "input_tokens": 8, "output_tokens": tokens}]},
    }))
    out = work / "run"
    t0 = time.time()
    proc = subprocess.run(
        [*pin1, sys.executable, "-m", "harness.cli.main", "run", str(scenario), "--target", f"http://127.0.0.1:{port}",
         "--out", str(out), "--no-report", "--quiet", *extra],
        capture_output=True, text=True, cwd=ROOT,
    )
    wall = time.time() - t0
    server.send_signal(signal.SIGTERM)
    server.wait(30)
    if proc.returncode != 0:
        raise SystemExit(f"harness run failed:\n{proc.stderr[-2000:]}")
    truth: dict[str, dict] = {}
    ticker: dict = {}
    for line in trace.read_text().splitlines():
        rec = json.loads(line)
        if "request_id" in rec:
            truth[rec["request_id"]] = rec
        else:
            ticker = rec
    requests = [json.loads(line) for path in sorted(out.glob("requests*.jsonl"))
                for line in path.read_text().splitlines()]
    result = {"summary": json.loads((out / "summary.json").read_text()), "truth": truth, "ticker": ticker,
              "requests": requests, "wall_s": wall}
    shutil.rmtree(work, ignore_errors=True)
    return result


def run_case(streams: int, itl_ms: float, tokens: int, ttft_ms: float, rounds: int, taskset: bool, extra: list[str],
             processes: int = 1) -> dict:
    # the server gets core 0, the harness cores 1..processes (one per load process)
    m = measure(streams, itl_ms, tokens, ttft_ms, rounds, "0" if taskset else None,
                ("1" if processes == 1 else f"1-{processes}") if taskset else None,
                ["--processes", str(processes), *extra])
    summary, truth, ticker, wall = m["summary"], m["truth"], m["ticker"], m["wall_s"]
    ttft_truth, itl_truth, ttft_err, itl_err = [], [], [], []
    for r in m["requests"]:
        t = truth.get(r["id"])
        if r["warmup"] or r["error"] or t is None:
            continue
        writes = t["writes"]
        tt = (writes[0] - t["received_ns"]) / 1e6
        ttft_truth.append(tt)
        ttft_err.append(r["ttft_ms"] - tt)
        offs = r["chunk_offsets_us"]
        gaps_truth = np.diff(writes) / 1e6
        gaps_meas = np.diff(offs) / 1e3
        if len(gaps_truth) == len(gaps_meas):
            itl_truth.extend(gaps_truth.tolist())
            itl_err.extend((gaps_meas - gaps_truth).tolist())
    lat = summary["latency_ms"]
    row = {
        "streams": streams,
        "itl_ms": itl_ms,
        "requests": summary["requests"]["completed"],
        "ttft_p50_err": lat["ttft"]["p50"] - pct(ttft_truth, 50),
        "ttft_p99_err": lat["ttft"]["p99"] - pct(ttft_truth, 99),
        "itl_p50_err": lat["itl_token"]["p50"] - pct(itl_truth, 50),
        "itl_p99_err": lat["itl_token"]["p99"] - pct(itl_truth, 99),
        "ttft_req_err_p50": pct(ttft_err, 50),
        "ttft_req_err_p99": pct(np.abs(ttft_err), 99),
        "itl_gap_err_p50": pct(itl_err, 50),
        "itl_gap_err_p99": pct(np.abs(itl_err), 99),
        "out_tok_s": summary["tokens"]["output_per_s"],
        "client_cpu_max": summary["client"]["cpu_max_pct"],
        "coalesced": summary["timing"]["coalesced_reads"],
        "clock": summary["timing"]["clock"],
        "server_tick_late_p99_ms": ticker.get("ticker_late_p99_ns", 0) / 1e6,
        "wall_s": wall,
    }
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="1:10,32:10,128:10,512:10,128:2", help="C:ITL_ms pairs")
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--ttft-ms", type=float, default=30.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-taskset", action="store_true")
    p.add_argument("--user-clock", action="store_true", help="stamp in user space (for comparison)")
    p.add_argument("--processes", type=int, default=1, help="harness load processes (each gets its own core)")
    p.add_argument("--json", help="also write rows here")
    args = p.parse_args()
    taskset = not args.no_taskset and shutil.which("taskset") is not None and os.cpu_count() and os.cpu_count() >= 2
    extra = ["--user-clock"] if args.user_clock else []
    rows = []
    hdr = (f"{'C':>4} {'ITL':>4} {'reqs':>5} | {'TTFT p50 Δ':>10} {'p99 Δ':>7} | {'ITL p50 Δ':>9} {'p99 Δ':>7} | "
           f"{'per-req TTFT |err| p99':>22} {'per-gap ITL |err| p99':>21} | {'out tok/s':>9} {'cpu%':>5} {'coal':>5}")
    print(hdr)
    for case in args.cases.split(","):
        c, itl = case.split(":")
        row = run_case(int(c), float(itl), args.tokens, args.ttft_ms, args.rounds, bool(taskset), extra, args.processes)
        rows.append(row)
        print(f"{row['streams']:>4} {row['itl_ms']:>4g} {row['requests']:>5} | {row['ttft_p50_err']:>+10.3f} "
              f"{row['ttft_p99_err']:>+7.3f} | {row['itl_p50_err']:>+9.3f} {row['itl_p99_err']:>+7.3f} | "
              f"{row['ttft_req_err_p99']:>22.3f} {row['itl_gap_err_p99']:>21.3f} | {row['out_tok_s']:>9,.0f} "
              f"{row['client_cpu_max'] or 0:>5.0f} {row['coalesced']:>5}", flush=True)
    print(f"errors in ms (harness - server truth); clock: {rows[0]['clock'] if rows else '-'}; "
          f"load processes: {args.processes}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
