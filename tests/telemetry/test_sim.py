"""Against the simulated engine (`python -m harness.sim`, vLLM metric names): the issue's 'done when'.

A KV-starved configuration (40 blocks of 16 tokens, 12 concurrent requests) must report
preemptions > 0 and KV usage near 1, a roomy one 0 preemptions; a shared-prefix workload must
report a hit rate near the expected one; direct and Prometheus modes must agree on the same run.
"""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from waiting import lines_of, wait_until

from harness.scenario.models import Telemetry
from harness.telemetry import TelemetrySession

from .conftest import PROMETHEUS, Prometheus, free_port
from .helpers import assert_close_tree, assert_shape, telemetry_warnings


def scraped(out, what: str, match) -> None:
    """Wait until OUT/engine_metrics.jsonl holds a scrape that `match`es."""
    wait_until(lambda: any(match(json.loads(x)) for x in lines_of(out / "engine_metrics.jsonl")), what)


pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("harness.sim") is None or importlib.util.find_spec("harness.sim.__main__") is None,
    reason="the simulated engine (python -m harness.sim) is not in this tree yet",
)

COMMON = ("--max-model-len", "512", "--block-size", "16", "--sim-speed", "10", "--disable-log-stats")


class Sim:
    def __init__(self, tmp, *flags: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"sim-{self.port}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.sim", "--port", str(self.port), *COMMON, *flags],
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "w"),
        )
        try:
            wait_until(self._healthy, "the simulated engine's /health", details=lambda: self.log.read_text()[-600:])
        except AssertionError:
            self.close()
            raise

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the simulated engine exited at start: {self.log.read_text()[-600:]}")
        try:
            return requests.get(self.url + "/health", timeout=0.5).status_code == 200
        except requests.RequestException:
            return False

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def drive(url: str, prompts: list[str], concurrency: int, max_tokens: int = 100) -> list[dict]:
    def one(prompt: str) -> dict:
        r = requests.post(
            url + "/v1/completions",
            timeout=120,
            json={"model": "sim-llama-8b", "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True},
        )
        r.raise_for_status()
        return r.json()["usage"]

    with ThreadPoolExecutor(concurrency) as ex:
        return list(ex.map(one, prompts))


def words(rng: random.Random, n: int) -> str:
    from harness.workload.builtin_tokenizer import VOCAB

    return " ".join(rng.choice(VOCAB) for _ in range(n))


@pytest.fixture(scope="module")
def starved(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sim")
    sim = Sim(tmp, "--num-gpu-blocks-override", "40", "--sim-speed", "3")  # load lasts ~2.5 s
    prom = None
    try:
        import os

        if os.access(PROMETHEUS, os.X_OK):
            prom = Prometheus(tmp, [f"127.0.0.1:{sim.port}"])
        yield sim, prom
    finally:
        if prom is not None:
            prom.close()
        sim.close()


def test_kv_starved_preempts_and_both_modes_agree(starved, tmp_path, caplog) -> None:
    sim, prom = starved
    rng = random.Random(1)
    sessions = {
        "direct": TelemetrySession(
            target_url=sim.url, config=Telemetry(interval_s=0.2, nvml=False), out_dir=tmp_path / "d", engine_kind="sim"
        )
    }
    if prom is not None:
        sessions["prometheus"] = TelemetrySession(
            target_url=sim.url,
            config=Telemetry(interval_s=0.5, nvml=False, prometheus=prom.url),
            out_dir=tmp_path / "p",
        )
    for s in sessions.values():
        s.start()
    warm = drive(sim.url, [words(rng, 60)], 1)  # warmup, outside the window
    for name in sessions:  # each source (Prometheus too) has seen the post-warmup state
        scraped(
            tmp_path / name[0],
            f"the {name} scrape of the post-warmup state",
            lambda x: x.get("generation_tokens_total") == warm[0]["completion_tokens"],
        )
    for s in sessions.values():
        s.mark_window_start()
    for name in sessions:
        scraped(tmp_path / name[0], f"the {name} baseline scrape", lambda x: x.get("mark") == "start")
    usage = drive(sim.url, [words(rng, 60) for _ in range(36)], concurrency=12)
    for s in sessions.values():
        s.mark_window_end()
    blocks = {k: s.stop() for k, s in sessions.items()}

    d = blocks["direct"]
    assert_shape(d)
    assert d["kv_capacity_tokens"] == 640 and d["block_size"] == 16
    assert d["preemptions"]["count"] > 0 and d["preemptions"]["per_s"] > 0
    assert d["kv_usage"]["max"] >= 0.85  # sampled every 0.2 s: near 1, not exactly 1
    assert d["waiting"]["max"] > 0
    assert d["generation_tokens"] == sum(u["completion_tokens"] for u in usage) == 3600
    assert d["engine_latency_ms"]["e2e"]["count"] == 36
    assert telemetry_warnings(caplog) == []
    if prom is None:
        pytest.skip(f"Prometheus binary not found ({PROMETHEUS}): direct mode checked, Prometheus mode skipped")
    p = blocks["prometheus"]
    assert p["telemetry"]["missing_reason"] is None
    for key in ("prompt_tokens", "generation_tokens", "preemptions", "prefix_cache", "kv_capacity_tokens"):
        assert_close_tree(p[key], d[key], rel=0.1, path=key)
    assert p["preemptions"]["count"] == d["preemptions"]["count"]
    assert_close_tree(p["engine_latency_ms"]["ttft"], d["engine_latency_ms"]["ttft"], path="ttft")
    assert p["kv_usage"]["max"] >= 0.8  # Prometheus samples every 0.5 s
    assert p["kv_usage"]["mean"] == pytest.approx(d["kv_usage"]["mean"], abs=0.2)


def test_roomy_shared_prefix_hits_the_expected_rate(tmp_path) -> None:
    sim = Sim(tmp_path, "--num-gpu-blocks-override", "4000")
    try:
        rng = random.Random(2)
        prefix = words(rng, 240)  # 15 full blocks, shared; 60 unique words after it
        expected = 240 / 300
        s = TelemetrySession(
            target_url=sim.url,
            config=Telemetry(interval_s=0.2, nvml=False),
            out_dir=tmp_path,
            expected_prefix_hit_rate=expected,
        )
        s.start()
        drive(sim.url, [prefix + " " + words(rng, 60)], 1)  # warmup fills the prefix cache
        s.mark_window_start()
        scraped(tmp_path, "the baseline scrape", lambda x: x.get("mark") == "start")
        drive(sim.url, [prefix + " " + words(rng, 60) for _ in range(24)], concurrency=6)
        s.mark_window_end()
        b = s.stop()
    finally:
        sim.close()
    assert b["preemptions"]["count"] == 0
    assert b["kv_usage"]["max"] < 0.3
    pc = b["prefix_cache"]
    assert pc["expected_hit_rate"] == expected
    assert pc["hit_rate"] == pytest.approx(expected, abs=0.05)
    assert pc["queries"] == b["prompt_tokens"] == 24 * 300


@pytest.mark.parametrize("fault, fragment", [("junk", "not Prometheus exposition"), ("absent", "404")])
def test_sim_metrics_faults(tmp_path, caplog, fault: str, fragment: str) -> None:
    sim = Sim(tmp_path, "--num-gpu-blocks-override", "400", "--fault-metrics", fault)
    try:
        s = TelemetrySession(
            target_url=sim.url, config=Telemetry(interval_s=0.2, nvml=False), out_dir=tmp_path, engine_kind="sim"
        )
        s.start()
        s.mark_window_start()
        drive(sim.url, ["bab bac bad"] * 4, concurrency=2, max_tokens=20)
        s.mark_window_end()
        b = s.stop()
    finally:
        sim.close()
    assert_shape(b)
    assert fragment in b["telemetry"]["missing_reason"] and b["preemptions"]["count"] is None
    assert len(telemetry_warnings(caplog)) == 1
