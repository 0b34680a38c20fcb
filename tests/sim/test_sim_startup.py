"""Startup of the simulated engine: flags, KV sizing failures, vLLM log lines, readiness, shutdown."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys

import aiohttp
from sim_client import chat_body, run, stream
from waiting import wait_for_text


def _run_cli(*flags: str, timeout: float = 20) -> subprocess.CompletedProcess:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return subprocess.run(
        [sys.executable, "-m", "harness.sim", "--port", str(port), "--startup-delay", "0", *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_unknown_flag_is_one_line_and_exit_2():
    r = _run_cli("--no-such-flag")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "unrecognized arguments: --no-such-flag" in lines[0]


def test_bad_flag_value_exit_2():
    r = _run_cli("--speculative-config", "{not json")
    assert r.returncode == 2 and "--speculative-config" in r.stderr


def test_max_model_len_that_cannot_fit_the_kv_cache_fails_startup():
    r = _run_cli("--sim-gpu-memory-gib", "24", "--max-model-len", "131072")
    assert r.returncode == 1
    assert "ValueError: To serve at least one request with the models's max seq len (131072)" in r.stderr
    assert "RuntimeError: Engine core initialization failed" in r.stderr
    assert "Starting vLLM server" not in r.stdout


def test_memory_fraction_beyond_the_gpu_fails_startup():
    r = _run_cli("--sim-gpu-memory-used-gib", "20", "--gpu-memory-utilization", "0.9")
    assert r.returncode == 1
    assert "is less than desired GPU memory utilization (0.9" in r.stderr
    assert "Engine core initialization failed" in r.stderr


def test_the_same_flags_start_when_they_fit(sim):
    sim("--sim-gpu-memory-gib", "24", "--max-model-len", "16384", "--gpu-memory-utilization", "0.9")


def test_startup_log_lines_in_vllm_format(sim):
    srv = sim("--max-model-len", "32k", "--sim-gpu-memory-gib", "80")
    out = srv.stdout()
    assert re.search(r"Model loading took \d+\.\d+ GiB memory and \d+\.\d+ seconds", out)
    assert re.search(r"Available KV cache memory: \d+\.\d+ GiB", out)
    m = re.search(
        r"GPU KV cache size: ([\d,]+) tokens, Maximum concurrency for 32,000 tokens per request: (\d+\.\d\d)x", out
    )
    assert m and "," in m.group(1)
    tokens = int(m.group(1).replace(",", ""))
    assert abs(tokens / 32000 - float(m.group(2))) < 0.01
    assert re.search(r"Graph capturing finished in \d+ secs, took \d+\.\d+ GiB", out)
    assert re.search(r"init engine \(profile, create kv cache, warmup model\) took \d+\.\d+ s", out)
    assert f"Starting vLLM server on http://127.0.0.1:{srv.port}" in out
    # the line and the metric agree
    assert f'kv_cache_size_tokens="{tokens}"' in srv.get("/metrics")[2].decode()


def test_enforce_eager_has_no_graph_capture_line(sim):
    srv = sim("--max-model-len", "8192", "--enforce-eager")
    assert "Graph capturing finished" not in srv.stdout()


def test_http_answers_only_once_ready(sim):
    srv = sim("--max-model-len", "8192", "--startup-delay", "1.0", wait=False)
    ready_after = srv.wait_ready()
    assert ready_after >= 0.9
    assert "Starting vLLM server" in srv.stdout()


def test_max_model_len_auto_is_what_fits(sim):
    srv = sim("--sim-gpu-memory-gib", "24", "--max-model-len", "auto")
    max_len = json.loads(srv.get("/v1/models")[2])["data"][0]["max_model_len"]
    m = re.search(r"GPU KV cache size: ([\d,]+) tokens", srv.stdout())
    assert max_len == int(m.group(1).replace(",", "")) < 131072


def test_periodic_stats_line(sim):
    srv = sim("--max-model-len", "2048", "--sim-log-stats-interval", "0.2")

    async def go():
        async with aiohttp.ClientSession() as s:
            await stream(s, srv.url, chat_body("a b c", 40))

    run(go())
    wait_for_text(srv.out_path, "Engine 000: Avg prompt throughput")
    assert re.search(
        r"Engine 000: Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ tokens/s, "
        r"Running: \d+ reqs, Waiting: \d+ reqs, GPU KV cache usage: [\d.]+%",
        srv.stdout(),
    )


def test_sigterm_exits_0(sim):
    srv = sim("--max-model-len", "2048")
    assert srv.stop(signal.SIGTERM) == 0
