"""Memory and time of `harness run`'s finish step on a long run's requests.jsonl.

Why: a 1-hour, 512-stream run (360,931 requests, bench/results/rss_1h_2core_vm.txt) kept its load
process flat at ~110 MiB, but the `harness run` parent reached 3.4-5 GB RSS while finishing: the
post-run analyses (and the report) held every requests.jsonl line as a Python dict.

Method: synthesize a run directory shaped like that run: C closed-loop streams, N requests of T
one-token chunks at ITL ~ `--itl-ms` (10% jitter), lines written in finish order by the real
writer (RequestRecord.to_json, the load controller's compact encoder), every request recorded
in the real MetricSet and summary.json / histograms.json built by the real build_summary. Then
each finish step runs alone in a fresh process that prints its peak RSS (ru_maxrss) and seconds:

  diagnose   harness.diagnose.diagnose (finish.conclude's post-run analyses: timeslices,
             interference, ... read requests.jsonl)
  report     harness.report.write_report (report.md + report.html, as `harness run` writes them)
  merge      harness.run.modes.merge_worker_files (--processes N joins requests.wK.jsonl)

    python bench/finish_memory.py --requests 360000 --dir /tmp/fin360k      # the 1-hour run's size
    python bench/finish_memory.py --requests 20000 --long-share 0.02         # long prompts too
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("diagnose", "report", "merge")
WINDOW_START_UNIX = 1_764_780_000.0  # a Thursday in December 2025, 17:20 UTC
MONO_BASE_NS = 412_345_678_901_234  # a perf_counter_ns a few days after boot


def synthesize(out: Path, n: int, streams: int, tokens: int, itl_ms: float, ttft_ms: float, long_share: float) -> None:
    from harness.load.controller import _encode_line
    from harness.metrics.record import RequestRecord
    from harness.metrics.recorder import MetricSet
    from harness.results.build import build_summary
    from harness.results.layout import write_json_atomic

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    metrics = MetricSet()
    # each stream: its next request's (finish ns, stream, record); lines go out in finish order
    heap: list[tuple[int, int, int]] = []
    pending: dict[int, RequestRecord] = {}
    index = 0

    def plan(stream: int, start_ns: int) -> None:
        nonlocal index
        long = long_share > 0 and rng.random() < long_share
        prompt = 2048 if long else 8
        first = max(1_000_000, int(ttft_ms * (8.0 if long else 1.0) * 1e6 * (1 + 0.1 * rng.standard_normal())))
        gaps = np.maximum(100_000, (itl_ms * 1e6 * (1 + 0.1 * rng.standard_normal(tokens - 1))).astype(np.int64))
        chunk_ns = (start_ns + first + np.concatenate(([0], np.cumsum(gaps)))).tolist()
        rec = RequestRecord(
            index=index,
            class_name="chat",
            request_id=f"m0-{index}",
            sent_ns=start_ns,
            chunk_ns=chunk_ns,
            chunk_tokens=[1] * tokens,
            done_ns=chunk_ns[-1] + 200_000,
            input_tokens=prompt,
            intended_input_tokens=prompt,
            output_tokens=tokens,
            events=tokens + 2,
        )
        index += 1
        pending[rec.index] = rec
        heapq.heappush(heap, (rec.done_ns or 0, stream, rec.index))

    for s in range(streams):
        plan(s, MONO_BASE_NS + s * 1_000_000)
    last_send = 0
    with open(out / "requests.jsonl", "w") as fh:
        written = 0
        while written < n:
            done_ns, stream, i = heapq.heappop(heap)
            rec = pending.pop(i)
            fh.write(_encode_line(rec.to_json()) + "\n")
            metrics.record(rec)
            written += 1
            last_send = max(last_send, rec.sent_ns)
            if written + len(pending) < n:
                plan(stream, done_ns + 300_000)
    end_ns = max(rec.done_ns or 0 for rec in pending.values()) if pending else done_ns
    duration = (end_ns - MONO_BASE_NS) / 1e9
    drain = (end_ns - last_send) / 1e9
    window = {
        "start": WINDOW_START_UNIX,
        "end": WINDOW_START_UNIX + duration,
        "warmup_s": 0.0,
        "drain_s": drain,
        "warmup_requests": 0,
    }
    summary, merged = build_summary(
        scenario={"name": "finish-memory", "seed": 1},
        target={"url": "http://127.0.0.1:1", "api": "chat", "model": "synthetic", "engine_kind": "sim"},
        load={"mode": "closed", "concurrency": streams, "duration_s": duration},
        results=[{"metrics": metrics.to_dict(), "window": window, "sent": n}],
        engine={},
        stall_meter=None,
    )
    write_json_atomic(out / "summary.json", summary.model_dump(mode="json"))
    write_json_atomic(out / "histograms.json", merged.to_dict())
    shutil.copy2(out / "summary.json", out / "summary.before-finish.json")


def measure(step: str, run_dir: Path) -> dict[str, float]:
    """One step in this (fresh) process: its seconds and the process's peak RSS."""
    from harness.diagnose import DiagnoseOptions, diagnose
    from harness.report import write_report
    from harness.results.models.summary import RunSummary
    from harness.run.modes import merge_worker_files

    summary = RunSummary.model_validate_json((run_dir / "summary.before-finish.json").read_text())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    if step == "diagnose":
        diagnose(summary, run_dir, DiagnoseOptions(slice_s=10.0))
        (run_dir / "summary.json").write_text(summary.model_dump_json(indent=1))
    elif step == "report":
        write_report(run_dir)
    elif step == "merge":
        # two halves as two load processes' files, joined as --processes 2 does
        work = run_dir / "merge"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        lines = 0
        with (
            open(run_dir / "requests.jsonl", "rb") as fin,
            open(work / "requests.w0.jsonl", "wb") as a,
            open(work / "requests.w1.jsonl", "wb") as b,
        ):
            for line in fin:
                (a if lines % 2 == 0 else b).write(line)
                lines += 1
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        from harness.results.layout import RunDir

        merge_worker_files(RunDir(work))
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": round(seconds, 2), "rss_before_mib": round(before, 1), "rss_peak_mib": round(peak, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=360_000)
    ap.add_argument("--streams", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--itl-ms", type=float, default=50.0)
    ap.add_argument("--ttft-ms", type=float, default=30.0)
    ap.add_argument("--long-share", type=float, default=0.0, help="share of 2048-token prompts (interference)")
    ap.add_argument("--dir", type=Path, help="run directory to synthesize into (kept; reused when it exists)")
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)  # internal: measure one step here
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    if args.step:
        print(json.dumps(measure(args.step, args.dir)))
        return 0
    run_dir = args.dir or Path(f"/tmp/finish_memory_{args.requests}")
    if not (run_dir / "summary.before-finish.json").is_file():
        t0 = time.perf_counter()
        synthesize(run_dir, args.requests, args.streams, args.tokens, args.itl_ms, args.ttft_ms, args.long_share)
        print(f"synthesized {args.requests:,} requests in {time.perf_counter() - t0:.1f} s -> {run_dir}")
    size = (run_dir / "requests.jsonl").stat().st_size
    print(f"requests.jsonl: {size / 2**20:,.0f} MiB, {args.requests:,} lines")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    figures: dict[str, dict[str, float]] = {}
    for step in args.steps.split(","):
        cmd = [sys.executable, __file__, "--step", step, "--dir", str(run_dir)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            print(f"{step}: failed (rc {done.returncode})\n{done.stderr[-3000:]}")
            continue
        figures[step] = json.loads(done.stdout.strip().splitlines()[-1])
        f = figures[step]
        print(
            f"{step:<9} {f['seconds']:>7.1f} s   peak RSS {f['rss_peak_mib']:>7,.0f} MiB "
            f"({f['rss_peak_mib'] * 1.048576:,.0f} MB; {f['rss_before_mib']:,.0f} MiB before the step)"
        )
    if args.json:
        args.json.write_text(json.dumps({"requests": args.requests, "figures": figures}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
