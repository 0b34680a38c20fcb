"""Fixtures: free ports, a fake /metrics server, the fake vLLM exporter process, a real Prometheus."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from waiting import wait_until

HERE = pathlib.Path(__file__).parent
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
needs_prometheus = pytest.mark.skipif(
    not os.access(PROMETHEUS, os.X_OK),
    reason=f"Prometheus binary not found ({PROMETHEUS}); CI installs Debian's prometheus",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- fake /metrics endpoint
class FakeMetrics:
    """A tiny HTTP server whose /metrics answer is set per test: (status, content_type, body, delay_s)."""

    def __init__(self) -> None:
        self.status, self.content_type, self.body, self.delay_s = 200, "text/plain; version=0.0.4", "", 0.0
        self.hits = 0
        self.holding = False  # hold(): each request waits for its release()
        self.held: list[threading.Event] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.hits += 1
                if fake.delay_s:
                    time.sleep(fake.delay_s)  # a slow endpoint: the delay is the behaviour under test
                if fake.holding:
                    gate = threading.Event()
                    fake.held.append(gate)
                    gate.wait(timeout=120)
                body = fake.body.encode() if isinstance(fake.body, str) else fake.body
                try:
                    self.send_response(fake.status)
                    if fake.content_type:
                        self.send_header("Content-Type", fake.content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_POST = do_GET

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def set(
        self,
        body: str | bytes,
        *,
        status: int = 200,
        content_type: str | None = "text/plain; version=0.0.4",
        delay_s: float = 0.0,
    ) -> None:
        self.body, self.status, self.content_type, self.delay_s = body, status, content_type, delay_s

    def hold(self) -> None:
        """Requests from now on are held unanswered until released, however long that takes: a
        /metrics slower than anything the test does, without a guessed delay."""
        self.holding = True

    def release(self, index: int | None = None) -> None:
        """Answer the `index`-th held request (in arrival order), or all of them and stop holding."""
        if index is None:
            self.holding = False
            for gate in self.held:
                gate.set()
        else:
            self.held[index].set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_metrics() -> Iterator[FakeMetrics]:
    fake = FakeMetrics()
    yield fake
    fake.close()


# ---------------------------------------------------------------- exporter process
class Exporter:
    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "exporter.py"), "--port", str(self.port), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = self.proc.stdout.readline()
        assert json.loads(first).get("ready"), first
        self.url = f"http://127.0.0.1:{self.port}"

    def cmd(self, word: str) -> dict:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.cmd("quit")
                self.proc.wait(timeout=3)
            except Exception:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------- Prometheus
class Prometheus:
    """A real Prometheus on 127.0.0.1 scraping the given targets, with a temp TSDB.

    `ready_s`: until /-/ready; `first_scrape_s`: until every target has a sample (target discovery
    is throttled to 5 s in Prometheus 2.x, so this, not readiness, dominates the start).
    """

    def __init__(self, tmp: pathlib.Path, targets: list[str], *, interval: str = "500ms") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = tmp / "prometheus.yml"
        target_list = ", ".join(f"'{t}'" for t in targets)
        cfg.write_text(
            f"global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n"
            f"scrape_configs:\n  - job_name: engine\n    static_configs:\n      - targets: [{target_list}]\n"
        )
        self.log = tmp / "prometheus.log"
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "w"),
        )
        self._wait(lambda: requests.get(f"{self.url}/-/ready", timeout=0.5).status_code == 200, "Prometheus /-/ready")
        self.ready_s = time.perf_counter() - t0
        self._wait(lambda: self._up() >= len(targets), f"Prometheus's first scrape of {len(targets)} target(s)")
        self.first_scrape_s = time.perf_counter() - t0

    def _up(self) -> int:
        r = requests.get(f"{self.url}/api/v1/query", params={"query": "up == 1"}, timeout=1).json()
        return len(r["data"]["result"])

    def _wait(self, ok: Callable[[], bool], what: str) -> None:
        def met() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            try:
                return ok()
            except (requests.RequestException, KeyError, ValueError):
                return False

        wait_until(met, what, details=lambda: self.log.read_text()[-2000:])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
