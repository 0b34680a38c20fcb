"""A run whose simulated engine fell behind its own schedule is invalid, with the figure (audit N6).

Real parts: the simulated engine as a process, `harness run` as a user types it, and a starved
engine made real by stopping the simulator (SIGSTOP) for 0.6 s inside the measured window, what
a busy host does to it. Before, the run was "ok" and its figures silently those of a slower
engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from waiting import wait_until

from harness.run.provider import TargetProvider

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = {
    "name": "lag",
    "seed": 3,
    "load": {"concurrency": 4, "duration_s": 5},
    "warmup": {"duration_s": 0.5},
    "workload": {"classes": [{"name": "a", "input_tokens": 64, "output_tokens": 200}]},
    "telemetry": {"interval_s": 0.5},
}


def _measured_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.strip() and '"warmup": true' not in line)


@pytest.mark.slow  # ~8.5 CPU-s, 60 s on the loaded box; cheaper: tests/sim/test_sim_lag.py (a SIGSTOPped
# simulator counts the time it fell behind on /metrics), tests/results/test_build.py (that block makes
# the run invalid with the figure in the warning)
def test_a_starved_simulated_engine_makes_the_run_invalid_with_the_figure(tmp_path: Path) -> None:
    targets = TargetProvider(["--sim-speed", "4"], tmp_path)
    sim = targets.start()
    try:
        path = tmp_path / "lag.yaml"
        path.write_text(json.dumps(SCENARIO))
        out = tmp_path / "out"
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.cli.main", "run", str(path), "--target", sim.url, "--out", str(out)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # inside the window: the progress file says the measured phase began, and requests complete in it
        wait_until(
            lambda: '"phase": "measure"' in _text(out / "progress.jsonl") or proc.poll() is not None,
            "the measured phase",
        )
        wait_until(
            lambda: _measured_lines(out / "requests.jsonl") >= 3 or proc.poll() is not None, "3 measured requests"
        )
        assert sim.proc is not None
        os.kill(sim.proc.pid, signal.SIGSTOP)
        time.sleep(0.6)  # the starvation under test: the simulator gets no CPU for 0.6 s
        os.kill(sim.proc.pid, signal.SIGCONT)
        console, _ = proc.communicate(timeout=240)
    finally:
        targets.close()
    assert proc.returncode == 0, console[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    lag = summary["engine"]["simulator"]
    assert lag["behind_s"] >= 0.5 and lag["modelled_s"] > 0, lag
    warning = next(w for w in summary["validity"]["warnings"] if w.startswith("the simulated engine fell behind"))
    assert f"by {lag['behind_s']:.2f} s" in warning
    assert summary["validity"]["ok"] is False
    assert "the simulated engine fell behind its own schedule by" in console
    report = (out / "report.md").read_text()
    assert "Simulated engine behind its schedule" in report and "the simulated engine fell behind" in report


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""
