"""A load process in open loop, end to end against the simulated engine: the stop grace counts
from the window's end (open loop hands requests out ahead of their send times), and a stop
inside the window gives back the requests not yet due instead of sending or cutting them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_for_lines

from harness.load.plan import LoadPlan
from harness.run.provider import TargetProvider

SIM = ["--scripted-ttft-ms", "20", "--scripted-itl-ms", "10", "--disable-log-stats"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with TargetProvider(SIM, tmp_path_factory.mktemp("sim")) as targets:
        yield targets.start()


def start(tmp_path: Path, url: str, duration_s: float, grace_s: float) -> subprocess.Popen[str]:
    scenario = {
        "name": "o",
        "load": {"rate": 5.0, "arrival": "constant", "duration_s": duration_s},
        "workload": {"classes": [{"name": "c", "input_tokens": 8, "output_tokens": 4}]},
        "telemetry": {"enabled": False},
    }
    plan = LoadPlan(
        scenario=scenario,
        scenario_dir=str(tmp_path),
        target_url=url,
        model="sim-llama-8b",
        continuous_usage=False,
        out_dir=str(tmp_path),
        stop_grace_s=grace_s,
    )
    path = tmp_path / "plan.json"
    path.write_text(plan.model_dump_json())
    return subprocess.Popen(
        [sys.executable, "-m", "harness.load.main", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def test_grace_starts_at_the_end_of_the_window_not_at_the_last_hand_out(sim, tmp_path: Path) -> None:
    # all 20 arrivals are handed out at once (20 < max_in_flight); with the grace counted from
    # then, the requests due after 1 s were cut
    proc = start(tmp_path, sim.url, duration_s=4.0, grace_s=1.0)
    proc.communicate(timeout=60)
    result = json.loads((tmp_path / "load_result.json").read_text())
    assert result["cut_at_end"] == 0
    assert result["sent"] == 20
    assert sum(1 for _ in open(tmp_path / "requests.jsonl")) == 20


def test_a_stop_inside_the_window_gives_back_requests_not_yet_due(sim, tmp_path: Path) -> None:
    proc = start(tmp_path, sim.url, duration_s=60.0, grace_s=5.0)
    assert proc.stdout is not None
    for line in proc.stdout:
        if '"window_start"' in line:
            break
    wait_for_lines(tmp_path / "requests.jsonl", 5, "5 requests done inside the window")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)  # a hang guard: the 60 s window is not waited for
    result = json.loads((tmp_path / "load_result.json").read_text())
    assert result["cut_at_end"] == 0
    assert 5 <= result["sent"] < 100  # those due by the stop; the others of the 300 planned were given back
    assert result["window"]["duration_s"] < 60  # the window closed at the stop, not at its planned end
