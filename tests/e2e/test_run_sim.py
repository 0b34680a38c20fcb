"""Every shipped scenario runs end to end against the built-in simulated engine (no --target).

The runs are started together (independent processes; no timing is asserted) to keep the
suite short, then each is checked on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
#: the Poisson example ramps over 5 s: its first arrivals come after 1 s
DURATION = {"poisson_rate": "4"}

pytestmark = pytest.mark.skipif(
    not (ROOT / "harness" / "sim" / "cli.py").exists(),
    reason="the simulated engine (harness/sim/cli.py) is not built yet",
)


#: shipped scenarios a dedicated fast test already runs end to end from the shipped file: here they
#: run with -m slow only (each run costs ~3 CPU-s of a 2-core box)
RUN_ELSEWHERE = {
    "agentic_mix": "tests/load/test_agentic_sim.py",
    "block_trace_replay": "tests/load/test_block_trace_sim.py",
    "lora_mix": "tests/load/test_adapters_sim.py",
}


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """Runs the selected scenarios, all at once."""
    selected = {
        it.callspec.params["name"]
        for it in request.session.items
        if it.module is request.module and hasattr(it, "callspec") and "name" in it.callspec.params
    }
    tmp = tmp_path_factory.mktemp("sim_runs")
    procs = {}
    for path in (p for p in SCENARIOS if p.stem in selected):
        out = tmp / path.stem
        # offline submits a request count at once (a duration does not apply): a small batch
        stop = ["--requests", "24"] if path.stem == "offline" else ["--duration", DURATION.get(path.stem, "1")]
        args = [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(path),
            *stop,
            "--warmup",
            "0",
            "--out",
            str(out),
            "--quiet",
        ]
        if path.stem != "smoke":
            args.append("--no-report")  # the report is checked once (smoke); it costs CPU
        procs[path.stem] = (
            subprocess.Popen(
                args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ)
            ),
            out,
        )
    results = {}
    for name, (proc, out) in procs.items():
        try:
            _stdout, stderr = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            _stdout, stderr = proc.communicate()
        results[name] = (proc.returncode, stderr, out)
    return results


def test_scenarios_are_shipped() -> None:
    names = {p.stem for p in SCENARIOS}
    assert {"mixed", "poisson_rate", "shared_prefix", "short_prompt_long_output", "long_prompt_short_output"} <= names


@pytest.mark.parametrize(
    "name", [pytest.param(p.stem, marks=pytest.mark.slow) if p.stem in RUN_ELSEWHERE else p.stem for p in SCENARIOS]
)
def test_shipped_scenario_against_the_simulated_engine(runs, name: str) -> None:
    rc, stderr, out = runs[name]
    assert rc == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "complete" and s["target"]["simulated"] is True
    assert s["requests"]["completed"] > 0 and s["requests"]["failed"] == 0, s["requests"]
    assert s["tokens"]["output_total"] > 0 and s["latency_ms"]["ttft"]["count"] == s["requests"]["completed"]
    # the simulated engine counts tokens with the built-in tokenizer: prompts hit their targets
    assert s["usage_check"]["max_diff"] == 0, s["usage_check"]
    lines = (out / "requests.jsonl").read_text().splitlines()
    assert len(lines) == s["requests"]["completed"] + s["requests"]["failed"]
    # no NVML here: the simulated engine's modelled device memory is the GPU figure, labelled (audit D20)
    gm = s["engine"]["gpu_memory"]
    if gm.get("source") != "nvml":  # a machine with a GPU measures that instead
        assert gm["available"] and gm["simulated"] and gm["used_max_bytes"] > 0, gm
    if name == "smoke":
        assert (out / "report.md").exists()
