"""A short capacity search against the real vLLM CPU build (slow: one `vllm serve` start plus a
few 6-s trials). The boundary of a tiny model on shared cores is whatever it is; the test checks
that the search brackets it against a real server, every trial is a run directory with engine
telemetry, and capacity.json holds the boundary with its uncertainty."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from waiting import wait_for_http

from harness.capacity.search import TrialSettings, search_capacity
from harness.scenario.loader import validate
from harness.scenario.models import Scenario

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_capacity_search_on_real_vllm(real_vllm, tmp_path):
    port = free_port()
    argv = [
        a.replace("{host}", "127.0.0.1").replace("{port}", str(port))
        for a in real_vllm.command(
            "--max-model-len", "512", "--max-num-seqs", "8", "--enforce-eager", "--uvicorn-log-level", "warning"
        )
    ]
    log = open(tmp_path / "vllm.log", "w")
    proc = subprocess.Popen(
        argv, env={**os.environ, **real_vllm.env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/health", proc, tmp_path / "vllm.log", timeout_s=900, interval_s=2)
        scenario = validate(
            Scenario,
            {
                "name": "cap-vllm",
                "seed": 1,
                "target": {"api": "openai-completions"},
                "load": {"rate": 1, "arrival": "constant", "duration_s": 6},
                "warmup": {"requests": 2},
                "slo": {"ttft_ms": 1500},
                "workload": {
                    "tokenizer": str(real_vllm.model),
                    "classes": [{"name": "c", "input_tokens": 64, "output_tokens": 16}],
                },
                "telemetry": {"interval_s": 0.5},
            },
            "test",
        )
        t0 = time.monotonic()
        res = search_capacity(
            scenario,
            tmp_path / "search",
            precision=0.25,
            max_trials=5,
            growth=2.0,
            settings=TrialSettings(target_url=url, engine_kind="vllm"),
        )
        wall = time.monotonic() - t0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    print(f"\nreal-vLLM capacity search ({wall:.0f} s):", *res.lines(), sep="\n  ")
    assert 2 <= len(res.trials) <= 5
    assert res.boundary is not None or res.first_failing is not None
    saved = json.loads((tmp_path / "search" / "capacity.json").read_text())
    assert len(saved["trials"]) == len(res.trials)
    for t in res.trials:  # every trial a normal run directory, measured against the real server
        s = json.loads((Path(t.run_dir) / "summary.json").read_text())
        assert s["requests"]["completed"] > 0 and s["target"]["url"] == url
        assert t.attainment is not None
