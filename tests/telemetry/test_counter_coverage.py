"""The engine's window counters against the prompt tokens the client's window carried.

A counter delta is the difference of two scrapes; when one is late, or other clients share the
engine, a prefix-cache hit rate or preemption count taken from it describes something else. CI
on a busy box found it: a 1.9-s sweep cell on real vLLM whose counters saw none of the window."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from harness.run.provider import TargetProvider
from harness.telemetry.block import empty_block
from harness.telemetry.reconcile import counter_coverage

ROOT = Path(__file__).resolve().parents[2]


def block(prompt_tokens: int | None, baseline_at: float | None = None, final_at: float | None = None) -> dict:
    b = empty_block(source="direct", profile="vllm", scrapes=5)
    b["prompt_tokens"] = prompt_tokens
    b["telemetry"].update({"baseline_at": baseline_at, "final_at": final_at})
    return b


def test_counters_that_saw_the_window_give_no_warning() -> None:
    assert counter_coverage(block(9221), 9216, 100.0, 102.0) == []
    assert counter_coverage(block(5000), 9216, 100.0, 102.0) == []  # above half: a scrape inside a request's prefill
    assert counter_coverage(block(None), 9216, 100.0, 102.0) == []  # the engine exposes no prompt counter
    assert counter_coverage(block(0), 100, 100.0, 102.0) == []  # too few tokens to say anything


def test_a_late_baseline_is_named_with_its_lag() -> None:
    w = counter_coverage(block(0, baseline_at=101.95, final_at=102.01), 9216, 100.0, 101.94)
    assert w == [
        "The engine's counters saw 0 of the 9,216 prompt tokens (0%) this window's requests carried (the "
        "baseline scrape was sent +1.95 s from the window's start, the final one +0.07 s from its end): the "
        "scrapes that bound the window missed part of it, so the engine's prefix-cache hit rate, preemptions "
        "and token counts describe only part of the window."
    ]
    # a source without scrape times (Prometheus range queries) still gets the figure
    assert "saw 1,000 of the 9,216" in counter_coverage(block(1000), 9216, None, None)[0]


def test_other_clients_on_the_engine_are_named() -> None:
    (w,) = counter_coverage(block(30000), 9216, 100.0, 102.0)
    assert w.startswith("The engine counted 30,000 prompt tokens in the window, 3.3x the 9,216 this run sent")
    # failed requests may have been admitted (a stopped capacity trial): no usage, so no verdict
    assert counter_coverage(block(30000), 9216, 100.0, 102.0, failed=3) == []


@pytest.fixture
def sim(tmp_path: Path):
    with TargetProvider(["--sim-speed", "4"], tmp_path) as targets:
        yield targets.start()


def _run(scenario: dict, target: str, out: Path) -> dict:
    path = out.with_suffix(".yaml")
    path.write_text(json.dumps(scenario))
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "run", str(path), "--target", target, "--out", str(out), "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


SCENARIO = {
    "name": "cover",
    "load": {"concurrency": 2, "requests": 16},
    "warmup": {"requests": 0},
    "workload": {"classes": [{"name": "a", "input_tokens": 200, "output_tokens": 8}]},
    "telemetry": {"interval_s": 0.2},
}


def test_a_run_alone_on_the_engine_is_covered_and_a_shared_engine_is_said(tmp_path: Path, sim) -> None:
    alone = _run(SCENARIO, sim.url, tmp_path / "alone")
    assert alone["engine"]["prompt_tokens"] == alone["tokens"]["input_total"] > 0
    assert not any("prompt tokens" in w for w in alone["validity"]["warnings"]), alone["validity"]

    # a second client sends long prompts to the same engine for the whole run
    stop = threading.Event()
    model = requests.get(f"{sim.url}/v1/models", timeout=10).json()["data"][0]["id"]

    def other_client() -> None:
        with requests.Session() as http:
            while not stop.is_set():
                http.post(
                    f"{sim.url}/v1/completions",
                    json={"model": model, "prompt": "word " * 1500, "max_tokens": 2},
                    timeout=30,
                )

    others = [threading.Thread(target=other_client, daemon=True) for _ in range(3)]
    for t in others:
        t.start()
    try:
        shared = _run(SCENARIO, sim.url, tmp_path / "shared")
    finally:
        stop.set()
        for t in others:
            t.join(timeout=30)
    assert shared["engine"]["prompt_tokens"] > 2 * shared["tokens"]["input_total"], shared["engine"]
    assert any("other clients share this engine" in w for w in shared["validity"]["warnings"]), shared["validity"]
    assert shared["validity"]["ok"] is False
