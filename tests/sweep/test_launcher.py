"""Launcher: readiness per engine kind against a tiny fake server, fail-fast on exit, timeout,
and stop kills the whole process group (including a worker that ignores SIGTERM)."""

import os
import signal

import pytest

from harness.engines import failure_hint, get_kind
from harness.sweep.launcher import EngineProcess, StartupFailed, free_port, group_alive, port_is_free
from harness.sweep.models import EngineSpec

from .conftest import fake_engine_command


def start(tmp_path, *extra, kind="vllm", timeout=20.0):
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in fake_engine_command(*extra)]
    proc = EngineProcess(argv, tmp_path / "logs" / "c.log")
    proc.start("test")
    spec = EngineSpec(kind=kind)
    k = get_kind(kind)
    seen = []

    def probe():
        p = k.probe(f"http://127.0.0.1:{port}", spec)
        seen.append(p.detail)
        return p

    return proc, port, (lambda: proc.wait_ready(probe, timeout, interval=0.05, failure_hint=failure_hint)), seen


@pytest.mark.parametrize(
    "kind, style, early",
    [
        ("vllm", "vllm", "GET /health: "),  # nothing listens before ready: connection refused
        ("sglang", "sglang", "GET /health -> 503"),  # up during warmup, 503 until it ends
        ("llamacpp", "llamacpp", 'GET /health -> 503 {"error": {"code": 503, "message": "Loading model"'),
        ("tgi", "tgi", "GET /health -> 503"),
    ],
)
def test_readiness_per_kind(tmp_path, kind, style, early):
    proc, _port, wait, seen = start(tmp_path, "--style", style, "--startup-delay", "0.6", kind=kind)
    try:
        started = wait()
        assert started.startup_s >= 0.6  # a lower bound the fake's sleep guarantees: cannot flake
        assert any(d.startswith(early) for d in seen), seen
        facts = get_kind(kind).startup_facts(started.log_text)
        if kind != "llamacpp":
            assert facts["kv_cache_tokens"] == 4096 * 16
    finally:
        proc.stop(5)


def test_custom_ready_path(tmp_path):
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in fake_engine_command("--style", "sglang")]
    proc = EngineProcess(argv, tmp_path / "c.log")
    proc.start()
    try:
        spec = EngineSpec(kind="custom", command=["x", "{port}"], ready_path="/v1/models")
        proc.wait_ready(
            lambda: get_kind("custom").probe(f"http://127.0.0.1:{port}", spec), 60, interval=0.05
        )  # raises unless ready
        assert (
            get_kind("custom")
            .reset_prefix_cache(f"http://127.0.0.1:{port}", spec)
            .startswith("engine.reset_path is not set")
        )
    finally:
        proc.stop(5)


def test_exit_before_ready_fails_at_once_with_reason_and_tail(tmp_path):
    proc, _port, wait, _ = start(tmp_path, "--num-gpu-blocks-override", "2", "--max-model-len", "2048")
    with pytest.raises(StartupFailed) as exc:
        wait()  # at the exit, not at the 20 s readiness timeout: the reason says which
    assert exc.value.reason.startswith(
        "engine exited with code 1 before it was ready: ValueError: To serve at least one request"
    )
    assert any("Engine core initialization failed" in line for line in exc.value.tail)
    proc.stop(5)


def test_readiness_timeout(tmp_path):
    proc, _port, wait, _ = start(tmp_path, "--startup-delay", "30", timeout=0.8)
    try:
        with pytest.raises(StartupFailed) as exc:
            wait()
        assert exc.value.reason.startswith("not ready after 0.8 s (last probe: GET /health:")
    finally:
        proc.stop(5)
    assert not group_alive(proc.pid)


def test_missing_executable(tmp_path):
    proc = EngineProcess(["/nonexistent/engine"], tmp_path / "c.log")
    with pytest.raises(StartupFailed, match="cannot start '/nonexistent/engine'"):
        proc.start()


def test_stop_kills_the_whole_group(tmp_path, monkeypatch):
    pidfile = tmp_path / "child.pid"
    monkeypatch.setenv("FAKE_CHILD_PIDFILE", str(pidfile))
    proc, port, wait, _ = start(tmp_path, "--spawn-child", "--ignore-sigterm")
    wait()
    child = int(pidfile.read_text())
    assert group_alive(proc.pid)
    code = proc.stop(timeout=0.5)  # both ignore SIGTERM: SIGKILL to the group after 0.5 s
    assert code == -signal.SIGKILL
    assert not group_alive(proc.pid)
    with pytest.raises(ProcessLookupError):
        _alive_or_raise(child)
    assert port_is_free(port)


def test_stop_graceful_is_quick(tmp_path, monkeypatch):
    pidfile = tmp_path / "child.pid"
    monkeypatch.setenv("FAKE_CHILD_PIDFILE", str(pidfile))
    proc, _port, wait, _ = start(tmp_path, "--spawn-child")
    wait()
    code = proc.stop(timeout=120)
    assert code == -signal.SIGTERM  # ended by the SIGTERM, not by the SIGKILL after the timeout
    assert not group_alive(proc.pid)


def _alive_or_raise(pid):
    """Raise ProcessLookupError unless `pid` is a live (non-zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        raise ProcessLookupError(pid) from None
    if state in ("Z", "X"):
        raise ProcessLookupError(pid)
    os.kill(pid, 0)
