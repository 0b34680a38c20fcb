"""A sweep over chunked prefill on the simulator: each cell's summary has the diagnosis (its engine
log read over the window), index.json carries the interference figures, and the closing table
names each config's top finding."""

from __future__ import annotations

import json
import subprocess
import sys

from simlag import retry_on_sim_lag

from tests.diagnose.conftest import REPO
from tests.diagnose.test_interference import SCENARIO

SWEEP = """
name: chunked
engine: {kind: sim, ready_timeout_s: 60, stop_timeout_s: 10}
base: {max-model-len: 16384, sim-speed: 2}
vary:
  mode: list
  configs:
    - {id: chunked-off, flags: {enable-chunked-prefill: false}}
    - {id: chunked-512, flags: {max-num-batched-tokens: 512}}
scenarios: [interference.yaml]
overrides: {load.duration_s: 4}
"""


def test_sweep_closing_table_and_index_carry_the_diagnosis(tmp_path):
    (tmp_path / "interference.yaml").write_text(SCENARIO)
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    # the ITL comparison is the simulator's step times: retried once when it fell behind
    retry_on_sim_lag(lambda out: _sweep_and_check(tmp_path, out), tmp_path)


def _sweep_and_check(tmp_path, out) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "sweep", str(tmp_path / "sweep.yaml"), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "top finding per config" in proc.stdout, proc.stdout[-3000:]
    entries = json.loads((out / "index.json").read_text())["cells"]
    by_id = {e["config_id"]: e for e in entries}
    off, on = by_id["chunked-off"]["metrics"], by_id["chunked-512"]["metrics"]
    assert off["itl_p99_inside_prefill_ms"] > on["itl_p99_inside_prefill_ms"], (off, on)
    assert off["finding"] and "chunked prefill" in off["finding"]
    md = (out / "report.md").read_text()
    assert "## Diagnosis per config" in md and "| chunked-off |" in md and "| chunked-512 |" in md
    summary = json.loads((out / by_id["chunked-off"]["run_dir"] / "summary.json").read_text())
    log = summary["diagnosis"]["engine_log"]
    assert log["scope"] == "measured window" and log["path"].endswith(".log") and log["lines"] >= 0
