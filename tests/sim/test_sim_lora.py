"""LoRA adapters in the simulated engine, over real HTTP: served by name, a load cost on the first
use, LRU GPU slots (--max-loras) and vLLM's `vllm:lora_requests_info` gauge."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import aiohttp
from waiting import wait_until

from tests.sim.sim_client import chat_body, run, stream, words

MODULES = ["--enable-lora", "--lora-modules", "a=/adapters/a", "b=/adapters/b", "c=/adapters/c"]


def _ttft(url: str, model: str) -> float:
    async def go() -> float:
        async with aiohttp.ClientSession() as s:
            res = await stream(s, url, chat_body(words(20), 2, model=model))
            assert res.status == 200, res.events
            return res.ttft_s()

    return run(go())


def test_adapters_are_served_by_name(sim) -> None:
    proc = sim(*MODULES)
    _, _, body = proc.get("/v1/models")
    listed = {m["id"]: m for m in json.loads(body)["data"]}
    assert listed["b"]["parent"] == "sim-llama-8b" and listed["b"]["root"] == "/adapters/b"

    async def unknown() -> int:
        async with aiohttp.ClientSession() as s:
            return (await stream(s, proc.url, chat_body("hi", 2, model="zz"))).status

    assert run(unknown()) == 404


def test_first_use_pays_the_load_and_slots_are_lru(sim) -> None:
    proc = sim(
        *MODULES, "--max-loras", "1", "--max-cpu-loras", "1", "--sim-lora-load-ms", "400", "--sim-lora-swap-ms", "0"
    )
    cold = _ttft(proc.url, "a")
    warm = _ttft(proc.url, "a")
    base = _ttft(proc.url, "sim-llama-8b")
    assert cold > warm + 0.3 and cold > base + 0.3
    _ttft(proc.url, "b")  # one slot, one host-cache entry: b evicts a
    assert _ttft(proc.url, "a") > warm + 0.3  # a is loaded again


def both_seen(m: dict[str, float]) -> dict[str, float] | None:
    """The metrics once one adapter's request runs and the other's waits (None before)."""
    info = [k for k in m if k.startswith("vllm:lora_requests_info{")]
    return (
        m
        if info and 'running_lora_adapters=""' not in info[-1] and 'waiting_lora_adapters=""' not in info[-1]
        else None
    )


def test_lora_requests_info_shows_running_and_waiting_adapters(sim) -> None:
    proc = sim(*MODULES, "--max-loras", "1", "--sim-speed", "0.5")

    async def go() -> dict[str, float]:
        async with aiohttp.ClientSession() as s:
            tasks = [asyncio.create_task(stream(s, proc.url, chat_body(words(30), 200, model=m))) for m in ("a", "b")]
            snapshot = await asyncio.to_thread(
                wait_until, lambda: both_seen(proc.metrics()), "one adapter running, one waiting"
            )
            await asyncio.gather(*tasks)
            return snapshot

    m = run(go())
    info = [k for k in m if k.startswith("vllm:lora_requests_info{")]
    assert len(info) == 1
    labels = dict(kv.split("=", 1) for kv in info[0][len("vllm:lora_requests_info{") : -1].split(","))
    labels = {k: v.strip('"') for k, v in labels.items()}
    # one slot: one adapter runs, the other's request waits (skipped by the scheduler)
    assert labels["max_lora"] == "1"
    assert {labels["running_lora_adapters"], labels["waiting_lora_adapters"]} == {"a", "b"}


def test_bad_lora_flags_are_one_line_errors() -> None:
    for flags, text in (
        (["--lora-modules", "a=/x"], "needs --enable-lora"),
        (["--enable-lora", "--lora-modules", "a"], "is not name=path"),
        (["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"], "--max-cpu-loras"),
    ):
        p = subprocess.run([sys.executable, "-m", "harness.sim", *flags], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and text in p.stderr and "Traceback" not in p.stderr, p.stderr
