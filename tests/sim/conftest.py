"""Fixtures for the simulated-engine tests: real `python -m harness.sim` processes over real HTTP.

`sim(*flags)` (module-scoped factory) starts a simulator on a free loopback port, waits for the
first 200 from /health, and returns a `SimProc`; every process a module started is stopped
(SIGTERM, then SIGKILL) when the module ends.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from waiting import HANG_S, wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SimProc:
    def __init__(self, flags: list[str], workdir: Path, wait: bool = True, timeout: float = 20.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.out_path = workdir / f"sim-{self.port}.out"
        self.err_path = workdir / f"sim-{self.port}.err"
        cmd = [sys.executable, "-m", "harness.sim", "--port", str(self.port)]
        if not any(f.startswith("--startup-delay") for f in flags):
            cmd += ["--startup-delay", "0.02"]
        cmd += list(flags)
        self.cmd = cmd
        # the simulator's output files, open while it runs (closed by stop())
        self._out = open(self.out_path, "w")
        self._err = open(self.err_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL)
        self.started = time.monotonic()
        if wait:
            self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 20.0) -> float:
        """Poll /health until 200; returns seconds since spawn. Fails if the process exits."""

        def healthy() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"simulator exited with {self.proc.returncode}: {self.stderr()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    return r.status == 200
            except (urllib.error.URLError, ConnectionError, OSError):
                return False

        wait_until(healthy, "the simulator's /health", timeout_s=max(timeout, HANG_S), details=self.stderr)
        return time.monotonic() - self.started

    def stdout(self) -> str:
        return self.out_path.read_text()

    def stderr(self) -> str:
        return self.err_path.read_text()

    def get(self, path: str, headers: dict | None = None, timeout: float = 10) -> tuple[int, dict, bytes]:
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def metrics(self) -> dict[str, float]:
        """Flat {name{labels}: value} of the text exposition, plus bare names summed over labels."""
        _, _, body = self.get("/metrics")
        out: dict[str, float] = {}
        for line in body.decode().splitlines():
            if not line or line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
            bare = key.split("{", 1)[0]
            out[bare] = out.get(bare, 0.0) + float(value) if bare != key else float(value)
        return out

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._out.close()
        self._err.close()
        return self.proc.returncode


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    procs: list[SimProc] = []
    workdir = tmp_path_factory.mktemp("sim")

    def start(*flags: str, wait: bool = True) -> SimProc:
        p = SimProc(list(flags), workdir, wait=wait)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


@pytest.fixture(autouse=True, scope="session")
def _repo_on_path():
    # the simulator subprocess imports `harness` from this checkout
    root = str(Path(__file__).resolve().parents[2])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = root + (os.pathsep + old if old else "")
    yield
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old
