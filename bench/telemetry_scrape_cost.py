"""What one telemetry scrape costs, and how long a test Prometheus takes to be useful.

    python bench/telemetry_scrape_cost.py [--repeat 200] [--no-prometheus]

Starts the simulated engine (vLLM metric names, every vLLM histogram), fetches its /metrics page
and times, per page: the full prometheus_client parse, the parse after the profile's line
prefilter (what the session does once the engine is known), and a whole scrape over HTTP
(fetch + prefilter + parse). A data-parallel page is synthesized by repeating the engine's series
for engine="1".."7". Then starts /usr/bin/prometheus scraping the sim every 500 ms and reports
time to /-/ready and to the first stored sample.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.engines import profiles
from harness.metrics import percentile  # nearest rank, as every harness figure
from harness.telemetry.direct import DirectSource
from harness.telemetry.exposition import names_in, parse


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float | None]:
    xs: list[float] = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        xs.append((time.perf_counter() - t) * 1e3)
    return statistics.median(xs), percentile.of_values(xs, 99.0)


def dp_page(page: str, engines: int) -> str:
    out = []
    for line in page.splitlines():
        out.append(line)
        if 'engine="0"' in line and not line.startswith("#"):
            out.extend(line.replace('engine="0"', f'engine="{e}"') for e in range(1, engines))
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--no-prometheus", action="store_true")
    args = ap.parse_args()
    port = free_port()
    sim = subprocess.Popen(
        [sys.executable, "-m", "harness.sim", "--port", str(port), "--max-model-len", "2048", "--disable-log-stats"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if requests.get(url + "/health", timeout=0.5).ok:
                    break
            except requests.RequestException:
                time.sleep(0.05)
        # a few requests so every histogram has buckets
        for _ in range(3):
            requests.post(
                url + "/v1/completions",
                json={"model": "sim-llama-8b", "prompt": "bab bac bad", "max_tokens": 20, "ignore_eos": True},
                timeout=30,
            )
        page = requests.get(url + "/metrics", timeout=5).text
        wanted = profiles().get("vllm").wanted()
        print(f"{'page':<28}{'KiB':>7}{'lines':>7}  {'full parse ms':>14}  {'prefiltered ms':>15}  {'names_in ms':>12}")
        for label, text in (("sim (vLLM names), 1 engine", page), ("synthetic, 8 DP engines", dp_page(page, 8))):
            full = timed(functools.partial(parse, text, 0.0), args.repeat)
            filt = timed(functools.partial(parse, text, 0.0, wanted=wanted), args.repeat)
            names = timed(functools.partial(names_in, text), args.repeat)
            lines = sum(1 for ln in text.splitlines() if ln and not ln.startswith("#"))
            print(
                f"{label:<28}{len(text) / 1024:>7.1f}{lines:>7}  {full[0]:>7.2f} (p99 {full[1]:.2f})"
                f"  {filt[0]:>7.2f} (p99 {filt[1]:.2f})  {names[0]:>12.2f}"
            )
        src = DirectSource(url + "/metrics")
        whole = timed(lambda: src.scrape(wanted), max(20, args.repeat // 4))
        print(
            f"whole scrape over HTTP (fetch + prefilter + parse), idle sim: median {whole[0]:.2f} ms, p99 {whole[1]:.2f} ms"
        )
        prom = shutil.which("prometheus") or "/usr/bin/prometheus"
        if args.no_prometheus or not os.access(prom, os.X_OK):
            return 0
        tmp = Path(tempfile.mkdtemp())
        pport = free_port()
        (tmp / "p.yml").write_text(
            f"global:\n  scrape_interval: 500ms\n  scrape_timeout: 500ms\nscrape_configs:\n"
            f"  - job_name: sim\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        )
        t0 = time.perf_counter()
        p = subprocess.Popen(
            [
                prom,
                f"--config.file={tmp / 'p.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{pport}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        ready = first = None
        try:
            while first is None and time.perf_counter() - t0 < 30:
                try:
                    if ready is None and requests.get(f"http://127.0.0.1:{pport}/-/ready", timeout=0.5).ok:
                        ready = time.perf_counter() - t0
                    if ready is not None:
                        r = requests.get(
                            f"http://127.0.0.1:{pport}/api/v1/query",
                            params={"query": '{__name__=~"vllm[:_]num_requests_running"}'},
                            timeout=1,
                        ).json()
                        if r["data"]["result"]:
                            first = time.perf_counter() - t0
                            stored = r["data"]["result"][0]["metric"]["__name__"]
                except requests.RequestException:
                    pass
                time.sleep(0.02)
        finally:
            p.terminate()
            p.wait()
            shutil.rmtree(tmp, ignore_errors=True)
        print(
            f"prometheus {re.sub(r'[^0-9.]', '', subprocess.run([prom, '--version'], capture_output=True, text=True, check=False).stdout.split()[2])}:"
            f" /-/ready after {ready:.3f} s, first stored sample after {first:.2f} s (stored as {stored!r})"
        )
    finally:
        sim.terminate()
        sim.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
