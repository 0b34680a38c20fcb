"""Start one engine in its own process group, wait until it is ready, stop the whole group.

The engine's stdout and stderr go to one log file (appended: a config restarted for a resume
or a cold start keeps one log); each start remembers its offset so the startup facts are read
from its own lines only. Stopping sends SIGTERM to the group, waits, then SIGKILLs the group and
waits until no live member is left (zombies of reparented workers do not count), then until the
port can be bound again and, where NVML sees GPUs, their memory is back to where it was.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engines import Probe
from harness.signals import die_with_parent


class StartupFailed(Exception):
    def __init__(self, reason: str, tail: list[str], after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.tail = tail
        self.after_s = after_s  # seconds from launch to the failure


@dataclass
class Started:
    startup_s: float
    log_text: str  # this start's log lines


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def wait_port_free(port: int, host: str = "127.0.0.1", timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if port_is_free(port, host):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process in group `pgid` (Linux /proc; [] elsewhere)."""
    out: list[tuple[int, str]] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parens: split after the last ')'
        rest = stat[stat.rfind(")") + 2 :].split()
        if len(rest) >= 3 and int(rest[2]) == pgid:
            out.append((int(entry), rest[0]))
    return out


def group_alive(pgid: int) -> bool:
    if os.path.isdir("/proc/self"):
        return any(state not in ("Z", "X") for _, state in group_members(pgid))
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tail_lines(path: Path, n: int = 20, start: int = 0) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(start, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    from harness.engines.parts.facts import strip_ansi

    lines = [ln.rstrip() for ln in strip_ansi(data).replace("\r", "\n").splitlines() if ln.strip()]
    return lines[-n:]


class EngineProcess:
    #: prefix of the not-ready reason (an attached server names its URL)
    what = ""
    label = "the engine"  # harness.run.follow.WatchedEngine: a run stops its load when it exits

    def __init__(
        self, argv: list[str], log_path: Path, env: dict[str, str] | None = None, cwd: str | Path | None = None
    ) -> None:
        self.argv = argv
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self.port: int | None = None  # the port it serves on, where the sweep chose it
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_offset = 0
        self.started_at = 0.0

    # ------------------------------------------------------------ lifecycle
    def start(self, header: str = "") -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            log.write(f"\n===== harness sweep {stamp}: {header}\n===== argv: {self.argv}\n".encode())
            log.flush()
            self.log_offset = log.tell()
            self.started_at = time.monotonic()
            try:
                self.proc = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    cwd=self.cwd,
                    start_new_session=True,  # own session + process group: killpg reaches workers
                    preexec_fn=_die_with_parent,
                )
            except OSError as exc:
                raise StartupFailed(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}", []) from None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def poll(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code if the process ends within `timeout`, else None (it keeps running)."""
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def tail(self, n: int = 20) -> list[str]:
        return tail_lines(self.log_path, n, start=self.log_offset)

    def wait_ready(
        self,
        probe: Callable[[], Probe],
        timeout: float,
        interval: float = 0.5,
        on_wait: Callable[[float, Probe], None] | None = None,
        failure_hint: Callable[[str], str | None] | None = None,
    ) -> Started:
        deadline = self.started_at + timeout
        last = Probe(False, "not probed yet")
        while True:
            code = self.poll()
            if code is not None:
                hint = failure_hint(self.log_text()) if failure_hint else None
                reason = f"engine exited with code {code} before it was ready"
                raise StartupFailed(
                    f"{reason}: {hint}" if hint else reason, self.tail(), time.monotonic() - self.started_at
                )
            last = probe()
            if last.ready:
                # a probe can race a dying process: ready only if it is still there
                if self.poll() is None:
                    return Started(time.monotonic() - self.started_at, self.log_text())
                continue
            now = time.monotonic()
            if now >= deadline:
                raise StartupFailed(
                    f"{self.what}not ready after {timeout:g} s (last probe: {last.detail})",
                    self.tail(),
                    now - self.started_at,
                )
            if on_wait:
                on_wait(now - self.started_at, last)
            time.sleep(min(interval, max(0.0, deadline - now)))

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM the group, wait up to `timeout`, SIGKILL the group, reap. Returns the exit code."""
        if self.proc is None:
            return None
        pgid = self.proc.pid  # session leader: its pid is the group id
        if group_alive(pgid) or self.proc.poll() is None:
            _killpg(pgid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                self.proc.poll()
                if not group_alive(pgid):
                    break
                time.sleep(0.1)
            else:
                _killpg(pgid, signal.SIGKILL)
                deadline = time.monotonic() + 10.0
                while group_alive(pgid) and time.monotonic() < deadline:
                    self.proc.poll()
                    time.sleep(0.1)
        try:
            return self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class AttachedEngine(EngineProcess):
    """Stands in for EngineProcess when the sweep attaches to a server it did not start (kind
    external): readiness is probed the same way; there is no process to watch, log or stop."""

    port = None

    def __init__(self, base_url: str) -> None:
        super().__init__([], Path("/dev/null"))
        self.base_url = base_url
        self.what = f"{base_url} "

    def start(self, header: str = "") -> None:
        self.started_at = time.monotonic()

    def log_text(self) -> str:
        return ""

    def tail(self, n: int = 20) -> list[str]:
        return []

    def stop(self, timeout: float = 30.0) -> int | None:
        return None


# the parent-death signal lives in harness.signals (the run's simulator and load processes use it too)
_die_with_parent = die_with_parent


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the
    pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
        return int(stat[stat.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def stop_leftover(pgid: int, ticks: int | None, timeout: float = 10.0) -> bool:
    """Stop a process group left by an earlier (killed) sweep; True when there was one.
    The group is only touched while its leader is the recorded process or gone entirely."""
    if not group_alive(pgid):
        return False
    now = start_ticks(pgid)
    if now is not None and ticks is not None and now != ticks:
        return False  # the pid was reused by an unrelated process
    _killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if group_alive(pgid):
        _killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
    return True


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# ---------------------------------------------------------------- GPU memory (best effort)
class GpuMemory:
    """Used memory per GPU through NVML, to wait until a stopped engine's memory is released."""

    def __init__(self) -> None:
        self._nvml = None
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            self._nvml = pynvml
            self.count = pynvml.nvmlDeviceGetCount()
        except Exception:
            self.count = 0

    @property
    def available(self) -> bool:
        return self._nvml is not None and self.count > 0

    def used(self) -> list[int]:
        nv = self._nvml
        if nv is None or self.count == 0:
            return []
        return [nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i)).used for i in range(self.count)]

    def wait_released(self, baseline: list[int], timeout: float, slack: int = 1 << 30) -> tuple[bool, list[int]]:
        deadline = time.monotonic() + timeout
        used = self.used()
        while used and any(u > b + slack for u, b in zip(used, baseline, strict=False)):  # the GPUs both lists have
            if time.monotonic() >= deadline:
                return False, used
            time.sleep(0.5)
            used = self.used()
        return True, used


class FleetEngines:
    """Several replicas of one config (engine.replicas), started, watched and stopped as one.

    Presents the EngineProcess interface the executor uses: ready when every replica is, exited
    when any replica exited (the fleet is not the config any more), logs of the first replica
    (the others have their own files), stop stops them all."""

    def __init__(self, procs: list[EngineProcess]) -> None:
        self.procs = procs
        self.argv = procs[0].argv
        self.port = getattr(procs[0], "port", None)
        self.proc = procs[0].proc

    def start(self, header: str = "") -> None:
        for i, p in enumerate(self.procs):
            p.start(header=f"{header} replica {i}")
        self.proc = self.procs[0].proc

    @property
    def pid(self) -> int | None:
        return self.procs[0].pid

    def poll(self) -> int | None:
        for p in self.procs:
            code = p.poll()
            if code is not None:
                return code
        return None

    def wait_exit(self, timeout: float) -> int | None:
        return self.procs[0].wait_exit(timeout) if self.poll() is None else self.poll()

    def log_text(self) -> str:
        return "\n".join(p.log_text() for p in self.procs)

    def tail(self, n: int = 20) -> list[str]:
        return [line for p in self.procs for line in p.tail(n)]

    def wait_ready(self, probes: Sequence[Callable[[], Probe]], timeout: float, **kw: Any) -> Started:
        started = [p.wait_ready(probe, timeout, **kw) for p, probe in zip(self.procs, probes, strict=True)]
        return Started(max(s.startup_s for s in started), started[0].log_text)

    def stop(self, timeout: float = 30.0) -> int | None:
        codes = [p.stop(timeout) for p in self.procs]
        return codes[0]
