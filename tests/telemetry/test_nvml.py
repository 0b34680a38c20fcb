"""NVML sampler: unavailable is a normal outcome; the arithmetic checked on a fake pynvml."""

from __future__ import annotations

import sys
import types

import pytest
from waiting import lines_of, wait_until

from harness.scenario.models import Telemetry
from harness.telemetry import TelemetrySession
from harness.telemetry.nvml import NvmlSampler, is_local_url

GIB = 1 << 30


def test_no_gpu_here_is_unavailable_with_a_reason() -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("a GPU is visible: this checks the GPU-less path")
    except Exception:  # no GPU: the case under test
        pass
    s = NvmlSampler()
    reason = s.open()
    assert reason and ("NVML" in reason or "pynvml" in reason)
    assert s.sample() is None and s.block()["available"] is False


class FakeNvml(types.ModuleType):
    def __init__(self, used: list[list[int]]) -> None:
        super().__init__("pynvml")
        self.used, self.calls, self.shutdown = used, 0, False

    def nvmlInit(self): ...
    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlDeviceGetCount(self):
        return len(self.used[0])

    def nvmlSystemGetDriverVersion(self):
        return b"550.90"

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h}"

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        if version is not None and getattr(self, "v2_fails", False):
            raise RuntimeError("NVML_ERROR_FUNCTION_NOT_FOUND")
        row = self.used[min(self.calls // len(self.used[0]), len(self.used) - 1)]
        self.calls += 1
        return types.SimpleNamespace(used=row[h], total=141 * GIB, free=141 * GIB - row[h])


def test_window_maxima_per_gpu(monkeypatch) -> None:
    fake = FakeNvml([[10 * GIB, 5 * GIB], [120 * GIB, 7 * GIB], [100 * GIB, 130 * GIB]])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    s = NvmlSampler()
    assert s.open() is None and s.devices[1] == {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-1"}
    for _ in range(3):
        s.sample()
    b = s.block()
    assert b["available"] and b["source"] == "nvml" and b["samples"] == 3 and b["driver"] == "550.90"
    assert [g["used_max_bytes"] for g in b["per_gpu"]] == [120 * GIB, 130 * GIB]
    assert b["used_max_bytes"] == 250 * GIB and b["total_bytes"] == 282 * GIB
    s.reset_window()
    assert s.block()["available"] is False
    s.close()
    assert fake.shutdown


def test_session_samples_only_local_targets(monkeypatch, tmp_path) -> None:
    fake = FakeNvml([[3 * GIB]])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    remote = TelemetrySession(
        target_url="http://10.255.255.1:8000",
        config=Telemetry(interval_s=0.1, enabled=True),
        out_dir=tmp_path / "r",
        engine_kind="transformers",
    )
    local = TelemetrySession(
        target_url="http://127.0.0.1:1",
        config=Telemetry(interval_s=0.1),
        out_dir=tmp_path / "l",
        engine_kind="transformers",
    )
    for s in (remote, local):
        s.start()
        s.mark_window_start()
    wait_until(
        lambda: any("gpu_used_bytes" in x for x in lines_of(tmp_path / "l" / "engine_metrics.jsonl")),
        "a GPU memory sample of the local target",
    )
    for s in (remote, local):
        s.mark_window_end()
    r, l_ = remote.stop(), local.stop()
    assert r["gpu_memory"]["available"] is False and "not this machine" in r["gpu_memory"]["reason"]
    assert l_["gpu_memory"]["available"] and l_["gpu_memory"]["used_max_bytes"] == 3 * GIB
    assert l_["telemetry"]["source"] == "none"  # transformers: no /metrics, GPU memory still sampled


@pytest.mark.parametrize(
    "url, local",
    [
        ("http://127.0.0.1:8000", True),
        ("http://localhost:8000/v1", True),
        ("http://[::1]:80", True),
        ("http://0.0.0.0:8000", True),
        (None, True),
        ("http://10.255.255.1:8000", False),
    ],
)
def test_is_local_url(url, local) -> None:
    assert is_local_url(url) is local


@pytest.mark.parametrize("v2_fails, api", [(False, "v2"), (True, "v1")])
def test_memory_api_v2_with_fallback(monkeypatch, v2_fails, api) -> None:
    fake = FakeNvml([[4 * GIB]])
    fake.nvmlMemory_v2 = 0x02000028
    fake.v2_fails = v2_fails
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    s = NvmlSampler()
    assert s.open() is None
    s.sample()
    b = s.block()
    assert b["memory_api"].startswith(api) and b["used_max_bytes"] == 4 * GIB


def test_another_process_on_the_gpu_is_named(monkeypatch) -> None:
    """NVML is device-wide: when a second process holds GPU memory (on the H200 another vLLM held
    4.2 of a sweep cell's 8.4 GiB), the block lists the processes and says used_max counts all."""
    import os

    fake = FakeNvml([[20 * GIB]])
    own, other = os.getpid(), 2**22 + 7  # this process (its command line is readable) and one that is not here
    fake.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=own, usedGpuMemory=16 * GIB),
        types.SimpleNamespace(pid=other, usedGpuMemory=4 * GIB),
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    s = NvmlSampler()
    assert s.open() is None
    s.sample()
    b = s.block()
    assert [(p["pid"], p["used_max_bytes"]) for p in b["processes"]] == [(own, 16 * GIB), (other, 4 * GIB)]
    assert "python" in b["processes"][0]["command"] and b["processes"][1]["command"] == "?"
    assert b["note"].startswith("NVML reads the whole device: 2 processes held GPU memory in the window")
    assert "used_max_bytes counts them all" in b["note"]


def test_one_process_gets_no_note(monkeypatch) -> None:
    fake = FakeNvml([[20 * GIB]])
    fake.nvmlDeviceGetComputeRunningProcesses = lambda h: [types.SimpleNamespace(pid=1, usedGpuMemory=16 * GIB)]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    s = NvmlSampler()
    s.open()
    s.sample()
    assert len(s.block()["processes"]) == 1 and "note" not in s.block()
