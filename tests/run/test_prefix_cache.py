"""A warm prefix cache from an earlier run must not leak into the next one (audit D2).

Real parts: the simulated engine over HTTP (prefix caching on, as vLLM's default), `harness run`
as a user types it, twice against the same long-lived server with the same seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.results.models.engine import EngineBlock
from harness.run.prefix_cache import hit_rate_warning, workload_max_hit_rate
from harness.run.provider import TargetProvider
from harness.scenario import Scenario
from harness.workload.fingerprint import fingerprint
from harness.workload.generator import WorkloadGenerator

ROOT = Path(__file__).resolve().parents[2]

NO_SHARING = {
    "name": "noshare",
    "seed": 5,
    "load": {"concurrency": 4, "requests": 24},
    "warmup": {"requests": 0},
    "workload": {
        "classes": [{"name": "a", "input_tokens": {"dist": "uniform", "min": 200, "max": 400}, "output_tokens": 4}]
    },
    "telemetry": {"interval_s": 0.2},
}


def _scenario(**workload: object) -> Scenario:
    data = json.loads(json.dumps(NO_SHARING))
    data["workload"].update(workload)
    return Scenario.model_validate(data)


def test_salt_changes_words_not_lengths_classes_or_fingerprint() -> None:
    shared = {
        "classes": [
            {
                "name": "a",
                "input_tokens": 300,
                "output_tokens": 4,
                "shared_prefix": {"tokens": 128, "count": 2, "fraction": 1.0},
            },
            {"name": "b", "input_tokens": {"dist": "uniform", "min": 10, "max": 90}, "output_tokens": 8},
        ]
    }
    plain, salted = _scenario(**shared), _scenario(**shared, prompt_salt=17)
    g0, g1 = WorkloadGenerator(plain), WorkloadGenerator(salted)
    for i in range(30):
        a, b = g0.request(i), g1.request(i)
        assert (a.class_name, a.input_tokens, a.output_tokens, a.prefix_id) == (
            b.class_name,
            b.input_tokens,
            b.output_tokens,
            b.prefix_id,
        )
        assert len(a.text.split()) == len(b.text.split()) and len(a.prefix.split()) == len(b.prefix.split())
        assert a.text != b.text and (a.prefix != b.prefix or a.prefix == "")
    # the salted run still shares its own prefixes between its requests
    prefixes = {g1.request(i).prefix for i in range(30) if g1.request(i).prefix}
    assert len(prefixes) == 2
    assert fingerprint(plain) == fingerprint(salted)


def test_hit_rate_above_what_the_workload_allows_is_a_validity_warning() -> None:
    sc = _scenario()
    allowed = workload_max_hit_rate(sc, None)
    assert allowed == 0.0

    def engine(hit: float) -> EngineBlock:
        return EngineBlock.model_validate({"prefix_cache": {"hit_rate": hit}})

    assert hit_rate_warning(engine(0.615), allowed) is not None
    assert hit_rate_warning(engine(0.03), allowed) is None
    assert hit_rate_warning(engine(0.85), 0.8) is None


def _run(scenario_path: Path, target: str, out: Path, *extra: str) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(scenario_path),
            "--target",
            target,
            "--out",
            str(out),
            "--quiet",
            "--no-report",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


@pytest.fixture
def sim(tmp_path: Path):
    with TargetProvider(["--sim-speed", "4", "--enable-prefix-caching"], tmp_path) as targets:
        yield targets.start()


def test_second_run_against_a_long_lived_server_is_not_served_from_the_first_runs_cache(tmp_path: Path, sim) -> None:
    path = tmp_path / "noshare.yaml"
    path.write_text(json.dumps(NO_SHARING))
    first = _run(path, sim.url, tmp_path / "a")
    assert first["prefix_cache_isolation"]["mode"] == "reset"
    # opting out reproduces the leak, and the run says so
    warm = _run(path, sim.url, tmp_path / "warm", "--no-reset-prefix-cache")
    assert warm["engine"]["prefix_cache"]["hit_rate"] > 0.5
    assert any("exceeds" in w and "Prefix cache hit rate" in w for w in warm["validity"]["warnings"])
    assert warm["validity"]["ok"] is False
    # the default resets the cache first: the same prompts hit nothing
    again = _run(path, sim.url, tmp_path / "b")
    assert again["prefix_cache_isolation"] == {
        "mode": "reset",
        "reset_path": "/reset_prefix_cache",
        "prompt_salt": None,
        "reason": None,
    }
    assert again["engine"]["prefix_cache"]["hit_rate"] < 0.1
    assert not any("Prefix cache hit rate" in w for w in again["validity"]["warnings"])
    assert again["scenario"]["fingerprint"] == first["scenario"]["fingerprint"]


def test_target_without_a_reset_gets_salted_prompts(tmp_path: Path) -> None:
    from tests.fake_openai import FakeOpenAI

    server = FakeOpenAI().start()
    try:
        path = tmp_path / "noshare.yaml"
        path.write_text(json.dumps({**NO_SHARING, "load": {"concurrency": 2, "requests": 4}}))
        s1 = _run(path, server.url, tmp_path / "a")
        s2 = _run(path, server.url, tmp_path / "b")
    finally:
        server.stop()
    for s, run in ((s1, "a"), (s2, "b")):
        iso = s["prefix_cache_isolation"]
        assert iso["mode"] == "salt" and iso["prompt_salt"] >= 1 and "/reset_prefix_cache" in iso["reason"]
        resolved = (tmp_path / run / "scenario.yaml").read_text()
        assert f"prompt_salt: {iso['prompt_salt']}" in resolved
    assert s1["prefix_cache_isolation"]["prompt_salt"] != s2["prefix_cache_isolation"]["prompt_salt"]
    assert s1["scenario"]["fingerprint"] == s2["scenario"]["fingerprint"]


def test_a_server_that_never_answers_the_reset_holds_the_run_once_briefly(monkeypatch) -> None:
    """The audit's stall_head server: reset POSTs were accepted and never answered, and each of
    the two reset paths waited 30 s, so a 3-s run took 80 s. One timed-out path ends the attempt."""
    import socket

    import harness.run.prefix_cache as pc

    monkeypatch.setattr(pc, "RESET_TIMEOUT_S", 1.0)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepted by the kernel, never read or answered
    try:
        path, problem = pc.post_reset(f"http://127.0.0.1:{listener.getsockname()[1]}")
    finally:
        listener.close()
    assert path is None
    assert problem.startswith("/reset_prefix_cache -> ") and "/flush_cache" not in problem, problem


@pytest.mark.parametrize(
    "answer",
    [
        b"\x00\x01\x02 this is not http at all\r\n\r\n",
        b"HTTP/1.1 OK-ish\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx-pad: " + b"p" * 100000 + b"\r\n\r\n",
    ],
)
def test_a_reset_answered_with_junk_is_no_reset_not_an_internal_error(answer: bytes) -> None:
    """The audit's garbage_response / bad_status_line / huge_headers servers: http.client raised
    BadStatusLine / LineTooLong out of the reset, and `harness run` ended with exit 70."""
    import socket
    import threading

    from harness.run.prefix_cache import post_reset

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.sendall(answer)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        path, problem = post_reset(f"http://127.0.0.1:{listener.getsockname()[1]}")
    finally:
        listener.close()
    assert path is None and problem.startswith("/reset_prefix_cache -> "), problem
