"""A running `harness ui` over HTTP for the UI tests (test_web.py, test_web_workers.py,
test_guard.py): started against the simulated engine, driven the way Locust's page does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from waiting import wait_until

from harness.run.target import free_port

ROOT = Path(__file__).resolve().parents[2]


def write_scenario(path: Path, duration_s: float = 600) -> Path:
    path.write_text(
        json.dumps(
            {
                "name": "webui",
                "load": {"concurrency": 4, "duration_s": duration_s},
                "warmup": {"requests": 2},
                "workload": {
                    "classes": [
                        {
                            "name": "chat",
                            "input_tokens": {"dist": "uniform", "min": 16, "max": 128},
                            "output_tokens": {"dist": "uniform", "min": 16, "max": 64},
                        },
                        {"name": "rag", "weight": 0.5, "input_tokens": 512, "output_tokens": 32},
                    ]
                },
            }
        )
    )
    return path


class UI:
    def __init__(self, tmp: Path, *extra: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.results = tmp / "results"
        self.log = open(tmp / "ui.log", "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "ui",
                str(write_scenario(tmp / "webui.yaml")),
                "--web-port",
                str(self.port),
                "--results",
                str(self.results),
                "--sim-args",
                "--sim-speed 4",
                "--no-report",
                *extra,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
        self.wait_for(lambda: self.get("/llm/api/live")["state"] == "idle", 60, "the UI to come up")

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.base + path, timeout=10) as resp:
            return json.loads(resp.read())

    def post(self, path: str, form: dict[str, str] | None = None) -> dict:
        data = urllib.parse.urlencode(form or {}).encode()
        with urllib.request.urlopen(
            urllib.request.Request(self.base + path, data=data, method="POST"), timeout=120
        ) as r:
            body = r.read()
        try:
            return json.loads(body)
        except ValueError:
            return {}

    def wait_for(self, cond, timeout_s: float, what: str) -> None:
        def met():
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"the UI exited with {self.proc.returncode} while waiting for {what}; log:\n"
                    + Path(self.log.name).read_text()[-3000:]
                )
            try:
                return cond()
            except OSError:
                return False

        # `timeout_s` is a hang guard: the figures the callers pass (10-60 s) fit a quiet box, and a
        # busy one (load 22 here) took longer to reach the same state; never less than 120 s
        wait_until(
            met,
            what,
            timeout_s=max(timeout_s, 120.0),
            interval_s=0.25,
            details=lambda: "log:\n" + Path(self.log.name).read_text()[-3000:],
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def llm_rows(ui: UI) -> tuple[list[dict], list[dict]]:
    ext = {e["key"]: e["data"] for e in ui.get("/stats/requests")["extended_stats"]}
    return ext["llm"], ext["llm_run"]


def assert_cards_are_the_summary(live: dict, summary: dict) -> None:
    per_class = {**summary["per_class"], "All classes": summary}
    for row in live["classes"]:
        block = per_class[row["name"]]
        assert (row["requests"], row["failed"]) == (block["requests"]["completed"], block["requests"]["failed"]), row[
            "name"
        ]
        for metric, key in (("ttft", "ttft"), ("itl_token", "itl"), ("tpot", "tpot"), ("e2e", "e2e")):
            for p in ("p50", "p90", "p99"):
                assert row[key][p] == pytest.approx(block["latency_ms"][metric][p], rel=1e-9), (row["name"], metric, p)


def started_uis(tmp: Path) -> Iterator[Callable[..., UI]]:
    """A `ui_factory` fixture's body: make(*extra) starts a UI; each is stopped afterwards."""
    made: list[UI] = []

    def make(*extra: str) -> UI:
        ui = UI(tmp, *extra)
        made.append(ui)
        return ui

    yield make
    for ui in made:
        ui.stop()
