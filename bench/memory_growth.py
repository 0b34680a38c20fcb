"""Load-process memory against the number of requests: is RSS flat?

Method: bench/tick_server.py streams C concurrent requests closed-loop (`harness run` for
`--duration` seconds); every second this script samples the RSS of each load process
(`python -m harness.load.main`, found among `harness run`'s children) and the requests finished so
far (the process's progress.jsonl). It prints RSS against requests, the least-squares slope after
the first 20% of the run (KiB per 1,000 requests) and the mean RSS of the first vs the last 10% of
the samples (the issue's flatness criterion: within 10%).

    python bench/memory_growth.py --streams 512 --duration 600          # the issue's case, shorter
    python bench/memory_growth.py --streams 128 --tokens 20 --duration 120 --itl-ms 5   # many requests fast
    python bench/memory_growth.py --duration 3600                        # the 1-hour criterion
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from fidelity import free_port


def load_processes(parent: psutil.Process) -> list[psutil.Process]:
    out = []
    for child in parent.children(recursive=True):
        try:
            if any("harness.load" in part for part in child.cmdline()):
                out.append(child)
        except psutil.Error:
            pass
    return out


def done_so_far(run_dir: Path) -> int:
    total = 0
    for path in run_dir.glob("progress*.jsonl"):
        try:
            last = path.read_text().splitlines()[-1]
            total += int(json.loads(last).get("done", 0)) + int(json.loads(last).get("failed", 0))
        except (IndexError, ValueError, OSError):
            pass
    return total


def slope_kib_per_1k(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of RSS (MiB) against requests, in KiB per 1,000 requests."""
    n = len(points)
    if n < 3:
        return float("nan")
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in points)
    return (sxy / sxx) * 1024 * 1000 if sxx else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streams", type=int, default=512)
    p.add_argument("--duration", type=float, default=300.0, help="measured window, seconds")
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--ttft-ms", type=float, default=30.0)
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--servers", type=int, default=1, help="tick server processes (SO_REUSEPORT)")
    p.add_argument("--extra", default="", help="more `harness run` arguments, one string")
    p.add_argument("--every", type=float, default=1.0, help="sampling interval, seconds")
    p.add_argument("--json", help="also write the samples here")
    p.add_argument(
        "--samples",
        help="append each sample here as it is taken (JSON lines): a long run's figures survive an interruption",
    )
    args = p.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memgrowth_"))
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "tick_server.py"),
            "--port",
            str(port),
            "--ttft-ms",
            str(args.ttft_ms),
            "--itl-ms",
            str(args.itl_ms),
            *(["--workers", str(args.servers)] if args.servers > 1 else []),
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
                "name": f"mem-c{args.streams}",
                "load": {"concurrency": args.streams, "duration_s": args.duration},
                "warmup": {"requests": args.streams},
                "telemetry": {"enabled": False},
                "target": {"continuous_usage": "off"},
                "workload": {"classes": [{"name": "fixed", "input_tokens": 8, "output_tokens": args.tokens}]},
            }
        )
    )
    out = work / "run"
    run = subprocess.Popen(
        [
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
            "--processes",
            str(args.processes),
            *args.extra.split(),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    parent = psutil.Process(run.pid)
    samples: list[dict] = []
    t0 = time.time()
    try:
        while run.poll() is None:
            time.sleep(args.every)
            procs = load_processes(parent)
            rss = []
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    rss.append(proc.memory_info().rss / 2**20)
            if not rss:
                continue
            done = done_so_far(out)
            samples.append({"t": round(time.time() - t0, 1), "requests": done, "rss_mib": rss})
            if args.samples:
                with open(args.samples, "a") as f:
                    f.write(json.dumps(samples[-1]) + "\n")
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
        stderr = run.communicate(timeout=120)[1]
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    measured = [s for s in samples if s["requests"] > 0]
    if len(measured) < 10:
        raise SystemExit(f"too few samples ({len(measured)}); harness run said:\n{stderr[-2000:]}")
    k = max(1, len(measured) // 10)
    first = [max(s["rss_mib"]) for s in measured[:k]]
    last = [max(s["rss_mib"]) for s in measured[-k:]]
    # the slope past the first fifth: start-up and the Finisher's backlog reaching its bound are done
    steady = [(s["requests"], max(s["rss_mib"])) for s in measured[len(measured) // 5 :]]
    print(f"{'t s':>7} {'requests':>9} {'RSS MiB (per load process)':>30}")
    step = max(1, len(measured) // 20)
    for s in measured[::step]:
        print(f"{s['t']:>7.1f} {s['requests']:>9,} {' '.join(f'{r:7.1f}' for r in s['rss_mib']):>30}")
    first_mib, last_mib = sum(first) / len(first), sum(last) / len(last)
    print(
        f"streams {args.streams}, processes {args.processes}, window {args.duration:g} s, "
        f"requests {summary.get('requests', {}).get('completed', measured[-1]['requests']):,}, "
        f"out tok/s {summary.get('tokens', {}).get('output_per_s', 0):,.0f}, reader {summary.get('client', {}).get('reader', '-')}"
    )
    print(
        f"RSS first 10% {first_mib:.1f} MiB, last 10% {last_mib:.1f} MiB ({100 * (last_mib - first_mib) / first_mib:+.1f}%), peak {max(max(s['rss_mib']) for s in samples):.1f} MiB; "
        f"slope after the first 20%: {slope_kib_per_1k(steady):+.1f} KiB per 1,000 requests"
    )
    print(f"box load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "samples": samples}, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
