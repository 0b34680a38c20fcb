"""Client-timing fidelity: the harness's TTFT/ITL against a server's ground truth.

Method (PEERS.md §7): bench/tick_server.py writes one token per SSE event on a batched-decoding
schedule and logs when it actually wrote each one. `harness run` measures it closed-loop at
C streams. Truth: TTFT = first content write - request receipt (the server's kernel receive stamp);
ITL = gaps between writes. We report (a) reported percentile - truth percentile, as the peers were
measured, and (b) the per-request / per-gap error after joining on X-Request-Id. The server gets
its own cores (core 0, or 0..S-1 for --server-workers S), each load process one core after them.

`--readers native,python` runs every case with each stream reader in turn (A B A B with
--repeat), so the client's CPU per output token (summary client.cpu_us_per_output_token: the load
processes' CPU over the window / output tokens) compares readers in the same session.

    python bench/fidelity.py                  # the issue's cases: C = 1, 32, 128, 512 at 10 ms + capacity
    python bench/fidelity.py --cases 128:10   # C:ITL_ms pairs
    python bench/fidelity.py --cases 512:10,256:2 --readers native,python --repeat 3 --server-workers 2
    python bench/fidelity.py --cases 4096:10 --processes 4 --server-workers 4 --rounds 2
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

from harness.metrics import percentile


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: np.ndarray | list[float], q: float) -> float:
    v = percentile.of_values(values, q)  # nearest rank, as the harness's own figures
    return float("nan") if v is None else v


def measure(
    streams: int,
    itl_ms: float,
    tokens: int,
    ttft_ms: float,
    rounds: int,
    server_cores: str | None,
    client_cores: str | None,
    extra: list[str],
    prefix: str = "fid",
    server_workers: int = 1,
    env: dict[str, str] | None = None,
) -> dict:
    """Run the tick server and `harness run` against it; return the summary, the server's truth
    per request id, the harness's request lines and the ticker lateness. Shared with
    bench/client_capacity.py."""
    work = Path(tempfile.mkdtemp(prefix=f"{prefix}{streams}_"))
    port = free_port()
    trace = work / "trace.jsonl"
    pin0 = ["taskset", "-c", server_cores] if server_cores else []
    pin1 = ["taskset", "-c", client_cores] if client_cores else []
    server = subprocess.Popen(
        [
            *pin0,
            sys.executable,
            str(ROOT / "bench" / "tick_server.py"),
            "--port",
            str(port),
            "--ttft-ms",
            str(ttft_ms),
            "--itl-ms",
            str(itl_ms),
            "--trace",
            str(trace),
            "--workers",
            str(server_workers),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    server.stdout.readline()
    scenario = work / "scenario.yaml"
    scenario.write_text(
        json.dumps(
            {
                "name": f"{prefix}-c{streams}",
                "load": {"concurrency": streams, "requests": streams * rounds},
                "warmup": {"requests": streams},
                "telemetry": {"enabled": False},
                "target": {"continuous_usage": "off"},
                "workload": {"classes": [{"name": "fixed", "input_tokens": 8, "output_tokens": tokens}]},
            }
        )
    )
    out = work / "run"
    t0 = time.time()
    proc = subprocess.run(
        [
            *pin1,
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(scenario),
            "--target",
            f"http://127.0.0.1:{port}",
            "--out",
            str(out),
            "--no-report",
            "--quiet",
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
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
        else:  # one line per server process: keep the worst
            for key, value in rec.items():
                if key.startswith("ticker_") or key.startswith("tick_"):
                    ticker[key] = max(ticker.get(key, 0), value)
    requests = [
        json.loads(line) for path in sorted(out.glob("requests*.jsonl")) for line in path.read_text().splitlines()
    ]
    result = {
        "summary": json.loads((out / "summary.json").read_text()),
        "truth": truth,
        "ticker": ticker,
        "requests": requests,
        "wall_s": wall,
    }
    shutil.rmtree(work, ignore_errors=True)
    return result


def run_case(
    streams: int,
    itl_ms: float,
    tokens: int,
    ttft_ms: float,
    rounds: int,
    taskset: bool,
    extra: list[str],
    processes: int = 1,
    server_workers: int = 1,
    reader: str = "auto",
) -> dict:
    # the server gets cores 0..S-1, the harness the next `processes` cores (one per load process)
    cpus = os.cpu_count() or 1
    server_cores = "0" if server_workers == 1 else f"0-{server_workers - 1}"
    first = min(server_workers, cpus - 1)
    client_cores = str(first) if processes == 1 else f"{first}-{min(first + processes, cpus) - 1}"
    m = measure(
        streams,
        itl_ms,
        tokens,
        ttft_ms,
        rounds,
        server_cores if taskset else None,
        client_cores if taskset else None,
        ["--processes", str(processes), "--reader", reader, *extra],
        server_workers=server_workers,
    )
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
    client = summary["client"]
    row = {
        "streams": streams,
        "itl_ms": itl_ms,
        "reader": client.get("reader", "-"),
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
        "client_cpu_max": client["cpu_max_pct"],
        "cpu_us_per_token": client.get("cpu_us_per_output_token"),
        "rss_peak_mib": client.get("rss_peak_mib"),
        "coalesced": summary["timing"]["coalesced_reads"],
        "clock": summary["timing"]["clock"],
        "server_tick_late_p99_ms": ticker.get("ticker_late_p99_ns", 0) / 1e6,
        "server_tick_writes_p99_ms": ticker.get("tick_writes_p99_ns", 0) / 1e6,
        "truth_missing": sum(1 for r in m["requests"] if not r["warmup"] and r["id"] not in truth),
        "wall_s": wall,
    }
    return row


HEADER = (
    f"{'C':>4} {'ITL':>4} {'reader':>6} {'reqs':>5} | {'TTFT p50 Δ':>10} {'p99 Δ':>7} | {'ITL p50 Δ':>9} "
    f"{'p99 Δ':>7} | {'per-req TTFT |err| p99':>22} {'per-gap ITL |err| p99':>21} | {'out tok/s':>9} "
    f"{'cpu%':>5} {'µs/tok':>6} {'RSS MiB':>7} {'coal':>5} {'srv late':>8}"
)


def fmt(row: dict) -> str:
    return (
        f"{row['streams']:>4} {row['itl_ms']:>4g} {row['reader']:>6} {row['requests']:>5} | "
        f"{row['ttft_p50_err']:>+10.3f} {row['ttft_p99_err']:>+7.3f} | {row['itl_p50_err']:>+9.3f} "
        f"{row['itl_p99_err']:>+7.3f} | {row['ttft_req_err_p99']:>22.3f} {row['itl_gap_err_p99']:>21.3f} | "
        f"{row['out_tok_s']:>9,.0f} {row['client_cpu_max'] or 0:>5.0f} {row['cpu_us_per_token'] or 0:>6.1f} "
        f"{row['rss_peak_mib'] or 0:>7.1f} {row['coalesced']:>5} {row['server_tick_late_p99_ms']:>8.2f}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="1:10,32:10,128:10,512:10,128:2", help="C:ITL_ms pairs")
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--ttft-ms", type=float, default=30.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-taskset", action="store_true")
    p.add_argument("--user-clock", action="store_true", help="stamp in user space (for comparison)")
    p.add_argument("--processes", type=int, default=1, help="harness load processes (each gets its own core)")
    p.add_argument("--server-workers", type=int, default=1, help="tick server processes (SO_REUSEPORT, own cores)")
    p.add_argument(
        "--readers", default="auto", help="stream readers to run each case with, in turn: auto, native, python"
    )
    p.add_argument("--repeat", type=int, default=1, help="run the reader sequence this many times (A B A B ...)")
    p.add_argument("--json", help="also write rows here")
    args = p.parse_args()
    taskset = not args.no_taskset and shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
    extra = ["--user-clock"] if args.user_clock else []
    rows = []
    print(HEADER)
    for case in args.cases.split(","):
        c, itl = case.split(":")
        for _ in range(args.repeat):
            for reader in args.readers.split(","):
                row = run_case(
                    int(c),
                    float(itl),
                    args.tokens,
                    args.ttft_ms,
                    args.rounds,
                    bool(taskset),
                    extra,
                    args.processes,
                    args.server_workers,
                    reader,
                )
                rows.append(row)
                print(fmt(row), flush=True)
    readers = sorted({r["reader"] for r in rows})
    if len(readers) > 1:  # CPU per output token, each reader's median, as a ratio per case
        print("client CPU per output token (median over repeats), by case:")
        for case in args.cases.split(","):
            c, itl = case.split(":")
            mine = [r for r in rows if r["streams"] == int(c) and r["itl_ms"] == float(itl)]
            med = {rd: float(np.median([r["cpu_us_per_token"] for r in mine if r["reader"] == rd])) for rd in readers}
            ratio = med.get("python", float("nan")) / med.get("native", float("nan"))
            print(
                f"  C={c} ITL={itl} ms: "
                + ", ".join(f"{rd} {v:.2f} µs" for rd, v in med.items())
                + f"; python/native = {ratio:.2f}x"
            )
    print(
        f"errors in ms (harness - server truth); clock: {rows[0]['clock'] if rows else '-'}; "
        f"load processes: {args.processes}; server processes: {args.server_workers}; "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
