"""Offline (batch) throughput against the real vLLM CPU build (slow: one `vllm serve` start and two
small batches). The shipped `scenarios/offline.yaml` is submitted all at once twice through
`harness run --offline`'s path; both runs must complete every request, report the makespan and
its rates, and `harness compare` must accept the pair (same fingerprint: exit 0 or 1, not 2)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_for_http

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = 24


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *args], cwd=ROOT, capture_output=True, text=True, timeout=900
    )


def test_offline_batch_on_real_vllm(real_vllm, tmp_path):
    port = free_port()
    argv = [
        a.replace("{host}", "127.0.0.1").replace("{port}", str(port))
        for a in real_vllm.command(
            "--max-model-len", "4096", "--max-num-seqs", "8", "--enforce-eager", "--uvicorn-log-level", "warning"
        )
    ]
    log = open(tmp_path / "vllm.log", "w")
    proc = subprocess.Popen(
        argv, env={**os.environ, **real_vllm.env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/health", proc, tmp_path / "vllm.log", timeout_s=900, interval_s=2)
        runs = []
        for name in ("a", "b"):
            out = tmp_path / name
            done = harness(
                "run",
                "scenarios/offline.yaml",
                "--target",
                url,
                "--model",
                real_vllm.served_model_name,
                "--tokenizer",
                str(real_vllm.model),
                "--requests",
                str(REQUESTS),
                "--out",
                str(out),
                "--quiet",
                "--no-report",
            )
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            runs.append(json.loads((out / "summary.json").read_text()))
        compared = harness("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    for s in runs:
        off = s["load"]["offline"]
        print(
            f"\nreal-vLLM offline batch of {REQUESTS}: makespan {off['makespan_s']:.1f} s, "
            f"{off['req_per_s']:.2f} req/s, output {off['output_tok_per_s']:.0f} tok/s"
        )
        assert s["load"]["mode"] == "offline" and s["requests"]["completed"] == REQUESTS
        assert off["makespan_s"] > 0 and off["req_per_s"] > 0 and off["output_tok_per_s"] > 0
        assert s["engine"]["kv_usage"]["max"] is not None  # telemetry over the batch from the real /metrics
    assert compared.returncode in (0, 1), compared.stdout[-3000:] + compared.stderr[-3000:]
    assert "fingerprints match" in compared.stdout
