"""Offline throughput (`harness run --offline`) against the simulated engine over real HTTP: the
measured batch throughput matches what the simulator's cost model says N requests submitted at
once take, and the run is labelled offline with its makespan and the client check.

The simulator runs slowed down (`--sim-speed 0.05`: ~180 ms steps) so the makespan comes from the
cost model, not from this machine's scheduling, and the prompts are short enough that the prefill
step costs what a decode step does (weight reads): requests that arrive a step apart (the submit
spread on a busy box) then cost at most one step of the ~33 the batch needs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from simlag import retry_on_sim_lag

from harness.sim.cli import build_parser
from harness.sim.config import SimConfig
from harness.sim.costmodel import CostModel

ROOT = Path(__file__).resolve().parents[2]
N, INPUT, OUTPUT, SPEED = 32, 8, 32, 0.05
SIM_ARGS = [
    "--max-num-seqs",
    str(N),
    "--max-num-batched-tokens",
    "4096",
    "--sim-speed",
    str(SPEED),
    "--disable-log-stats",
]


def predicted_makespan() -> tuple[float, float]:
    """(makespan, one decode step): one step prefills every prompt (and gives each its first
    token), then OUTPUT-1 decode steps of the whole batch over a context growing by a token per step."""
    cost = CostModel.from_config(SimConfig.from_args(build_parser().parse_args(SIM_ARGS)))
    t = cost.step_seconds(N * INPUT, 0, N * INPUT, False)
    for k in range(1, OUTPUT):
        t += cost.step_seconds(0, N, N * (INPUT + k), False)
    return t, cost.step_seconds(0, N, N * (INPUT + OUTPUT), False)


def test_offline_throughput_matches_the_cost_model(tmp_path):
    scen = {
        "name": "off",
        "seed": 1,
        "load": {"concurrency": 1, "duration_s": 1},
        "warmup": {"requests": 2},
        "workload": {"classes": [{"name": "c", "input_tokens": INPUT, "output_tokens": OUTPUT}]},
    }
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scen))

    def attempt(out: Path) -> None:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "run",
                str(tmp_path / "s.yaml"),
                "--offline",
                "--requests",
                str(N),
                "--out",
                str(out),
                "--sim-args",
                " ".join(SIM_ARGS),
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "latency (ms, offline)" in proc.stdout and "makespan" in proc.stdout
        s = json.loads((out / "summary.json").read_text())
        off = s["load"]["offline"]
        assert s["load"]["mode"] == "offline" and off["requests"] == N and s["requests"]["completed"] == N
        assert off["peak_in_flight"] == N and off["client_limited"] is None, off  # every request on the wire at once
        # the cost model's makespan, plus at most one step for requests that reached the engine after
        # its first step began (the submit spread), within 4% (the sim's own per-step overhead)
        expected, step = predicted_makespan()
        low, high = 0.96 * expected, 1.04 * expected + step
        assert low <= off["makespan_s"] <= high, (off, expected, step)
        assert N / high <= off["req_per_s"] <= N / low, (off, N / expected)
        assert N * OUTPUT / high <= off["output_tok_per_s"] <= N * OUTPUT / low
        assert abs(off["input_tok_per_s"] - N * INPUT / off["makespan_s"]) < 0.01 * off["input_tok_per_s"]
        assert s["window"]["warmup_s"] > 0  # the warmup ran, and drained before the batch went out

    retry_on_sim_lag(attempt, tmp_path)


def test_an_offline_run_without_a_request_count_is_one_line(tmp_path):
    scen = {
        "name": "off",
        "load": {"concurrency": 1, "duration_s": 1},
        "workload": {"classes": [{"name": "c", "input_tokens": 8, "output_tokens": 8}]},
    }
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scen))
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "run", str(tmp_path / "s.yaml"), "--offline"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "requests" in lines[0], proc.stderr
