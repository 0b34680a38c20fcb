"""GPU memory sampling through NVML (nvidia-ml-py's `pynvml`).

NVML sees every GPU of *this* machine (it ignores CUDA_VISIBLE_DEVICES) and memory used by any
process, so the numbers mean the engine's memory only when the engine runs here, alone on its
GPUs; the session samples only when the target URL is local. The processes that hold GPU memory
are read with each sample (`processes`: pid, command, most memory held); when more than one held
memory in the window the block's `note` says that `used_max_bytes` counts them all (on the H200 a
sweep cell showed 8.4 GiB: 4.2 of them another vLLM's). No driver / no GPU is a normal case:
`open()` returns the reason and the block says {"available": false, "reason": ...}.
`bench/telemetry_nvml_check.py` prints what this module reads, to check it on a GPU machine.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from typing import Any
from urllib.parse import urlparse


class NvmlSampler:
    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list[Any] = []
        self.devices: list[dict[str, Any]] = []
        self.driver: str | None = None
        self._max_used: list[int] = []
        self._total: list[int] = []
        self.samples = 0
        self._v2 = False
        self._procs: dict[int, int] = {}  # pid -> most GPU memory it held in the window
        self._procs_ok = True

    def open(self) -> str | None:
        """Initialize NVML; None on success, else why GPU memory is unavailable."""
        try:
            import pynvml
        except ImportError:
            return "nvidia-ml-py (pynvml) is not installed"
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return f"NVML unavailable: {_text(exc)} (no NVIDIA driver or GPU visible)"
        try:
            count = pynvml.nvmlDeviceGetCount()
            if count == 0:
                pynvml.nvmlShutdown()
                return "NVML found no GPUs"
            self.driver = _text(pynvml.nvmlSystemGetDriverVersion())
            for i in range(count):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                self._handles.append(h)
                self.devices.append(
                    {"index": i, "name": _text(pynvml.nvmlDeviceGetName(h)), "uuid": _text(pynvml.nvmlDeviceGetUUID(h))}
                )
        except Exception as exc:
            self.close_quietly(pynvml)
            return f"NVML device query failed: {_text(exc)}"
        self._nvml = pynvml
        self._v2 = hasattr(pynvml, "nvmlMemory_v2")
        self._max_used = [0] * count
        self._total = [0] * count
        return None

    @property
    def active(self) -> bool:
        return self._nvml is not None

    def _meminfo(self, handle: Any) -> Any:
        """v2 memory info when the driver has it: `used` then excludes the driver's reserved memory
        and matches nvidia-smi (v1's `used` includes it: ~0.6 GiB on an idle H200)."""
        if self._v2:
            try:
                return self._nvml.nvmlDeviceGetMemoryInfo(handle, version=self._nvml.nvmlMemory_v2)
            except Exception:  # old driver or binding: fall back to v1 for good
                self._v2 = False
        return self._nvml.nvmlDeviceGetMemoryInfo(handle)

    def read(self) -> list[dict[str, int]]:
        """Current [{index, used_bytes, total_bytes}] (no window bookkeeping)."""
        out = []
        for i, h in enumerate(self._handles):
            mem = self._meminfo(h)
            out.append({"index": i, "used_bytes": int(mem.used), "total_bytes": int(mem.total)})
        return out

    def reset_window(self) -> None:
        self._max_used = [0] * len(self._handles)
        self.samples = 0
        self._procs = {}

    def _sample_processes(self) -> None:
        """Fold the compute processes' memory into the window; a driver or sandbox that cannot
        list them turns this off for good (the block then has no `processes`)."""
        if not self._procs_ok:
            return
        try:
            for h in self._handles:
                for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(h):
                    used = int(getattr(p, "usedGpuMemory", 0) or 0)
                    self._procs[int(p.pid)] = max(self._procs.get(int(p.pid), 0), used)
        except Exception:  # NVML_ERROR_NOT_SUPPORTED, no such function: leave it out
            self._procs_ok = False

    def sample(self) -> list[dict[str, int]] | None:
        """Read all GPUs and fold into the window maxima; None (and no raise) on NVML errors."""
        if not self.active:
            return None
        try:
            cur = self.read()
        except Exception:  # a GPU fell off the bus: keep what we have
            return None
        for g in cur:
            self._max_used[g["index"]] = max(self._max_used[g["index"]], g["used_bytes"])
            self._total[g["index"]] = g["total_bytes"]
        self.samples += 1
        self._sample_processes()
        return cur

    def block(self) -> dict[str, Any]:
        if not self.active:
            return {"available": False, "reason": "NVML not initialized"}
        if self.samples == 0:
            return {"available": False, "reason": "no NVML sample in the window"}
        per_gpu = [
            {**dev, "used_max_bytes": used, "total_bytes": total}
            for dev, used, total in zip(self.devices, self._max_used, self._total, strict=True)
        ]
        return {
            "available": True,
            "source": "nvml",
            "used_max_bytes": sum(self._max_used),
            "total_bytes": sum(self._total),
            "per_gpu": per_gpu,
            "samples": self.samples,
            "driver": self.driver,
            "memory_api": "v2 (used excludes driver-reserved memory)"
            if self._v2
            else "v1 (used includes driver-reserved memory)",
            **self._processes_block(),
        }

    def _processes_block(self) -> dict[str, Any]:
        if not self._procs_ok or not self._procs:
            return {}
        procs: list[dict[str, Any]] = sorted(
            ({"pid": pid, "command": _command(pid), "used_max_bytes": used} for pid, used in self._procs.items()),
            key=lambda p: -p["used_max_bytes"],
        )
        out: dict[str, Any] = {"processes": procs}
        holding = [p for p in procs if p["used_max_bytes"] > 0]
        if len(holding) > 1:
            parts = ", ".join(
                f"pid {p['pid']} {p['command'][:40]!r} {p['used_max_bytes'] / 2**30:.1f} GiB" for p in holding
            )
            out["note"] = (
                f"NVML reads the whole device: {len(holding)} processes held GPU memory in the window "
                f"({parts}); used_max_bytes counts them all, not the engine alone"
            )
        return out

    def close(self) -> None:
        if self._nvml is not None:
            self.close_quietly(self._nvml)
            self._nvml = None

    @staticmethod
    def close_quietly(pynvml: Any) -> None:
        with contextlib.suppress(Exception):  # shutting down anyway
            pynvml.nvmlShutdown()


def _command(pid: int) -> str:
    """The process's command line, when this machine can see it (another container's cannot)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip() or "?"
    except OSError:
        return "?"


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def is_local_url(url: str | None) -> bool:
    """True when the URL's host is this machine (loopback, unspecified, our hostname or address)."""
    if not url:
        return True
    host = urlparse(url if "//" in url else f"//{url}").hostname or ""
    if host in ("localhost", "", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(host))
        except (OSError, ValueError):
            return False
    if ip.is_loopback or ip.is_unspecified:
        return True
    try:
        local = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        local = set()
    return str(ip) in local
