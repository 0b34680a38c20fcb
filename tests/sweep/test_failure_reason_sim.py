"""A config whose run ends `failed` without raising still says why (audit N12: the README's
sim_max_num_seqs sweep showed `max-num-seqs=8 ... failed:` with nothing after it, and the
console `produced no results: no results`). Here one sequence slot and 2,000-token answers on a
slow simulated GPU: no request can finish inside the window and its 10-s drain, so every
measured request is cut; the row, the console and index.json name that and what to change."""

import json

import yaml

from tests.cli_here import harness_here

SCENARIO = {
    "name": "too_slow",
    "load": {"concurrency": 2, "duration_s": 1},
    "workload": {"classes": [{"name": "long", "input_tokens": 32, "output_tokens": 2000}]},
}
SWEEP = {
    "name": "too-slow",
    "engine": {"kind": "sim", "ready_timeout_s": 60, "stop_timeout_s": 10},
    "base": {"sim-hbm-tbps": 0.3, "max-model-len": 4096},
    "vary": {"flags": {"max-num-seqs": [1]}, "include_base": False},
    "scenarios": ["too_slow.yaml"],
}
WHY = "no request completed in the measured window (cut 2): every measured request was still in flight"


def test_a_config_that_finishes_nothing_says_why(tmp_path, capsys):
    (tmp_path / "too_slow.yaml").write_text(yaml.safe_dump(SCENARIO))
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(SWEEP))
    out = tmp_path / "out"
    got = harness_here(capsys, "sweep", str(tmp_path / "sweep.yaml"), "--out", str(out), "--no-report")
    assert got.returncode == 1, got.stdout + got.stderr
    [cell] = json.loads((out / "index.json").read_text())["cells"]
    assert cell["status"] == "failed"
    assert cell["reason"].startswith(WHY)
    assert "less load (load.concurrency or load.rate) or a longer window (load.duration_s" in cell["reason"]
    # the cell's line, the first error line, the table's row and the validity warning all carry it
    assert f"max-num-seqs=1 · too_slow r1: failed: {WHY}" in got.stderr
    assert f"error: every cell failed (1); nothing was measured: {WHY}" in got.stderr
    assert f"max-num-seqs=1                       failed: {WHY}" in got.stdout
    assert f"produced no results: {WHY}" in got.stdout
    assert "no results\n" not in got.stdout


DIES = {
    "name": "dies",
    "load": {"concurrency": 4, "requests": 400},
    "workload": {"classes": [{"name": "short", "input_tokens": 32, "output_tokens": 16}]},
}


def test_an_engine_that_dies_mid_cell_ends_its_load_at_once(tmp_path, capsys):
    """The sweep's engine exits after 20 requests: the cell's load stops there (as the embedded
    simulator's does), not after sending the other ~380 requests to a dead port (they took 55 s of
    connection errors on two cores, a real engine's thousands would take minutes), and the run's
    summary names the engine's exit and its log."""
    (tmp_path / "dies.yaml").write_text(yaml.safe_dump(DIES))
    sweep = {
        "name": "dies",
        "engine": {"kind": "sim", "ready_timeout_s": 60, "stop_timeout_s": 10},
        "base": {"sim-speed": 4, "fault-crash-after-requests": 20},
        "vary": {"flags": {"max-num-seqs": [4]}, "include_base": False},
        "scenarios": ["dies.yaml"],
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    out = tmp_path / "out"
    got = harness_here(capsys, "sweep", str(tmp_path / "sweep.yaml"), "--out", str(out), "--no-report")
    assert got.returncode == 1, got.stdout + got.stderr
    [cell] = json.loads((out / "index.json").read_text())["cells"]
    assert cell["reason"].startswith("engine exited with code 1 during the run"), cell
    summary = json.loads((out / cell["run_dir"] / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["status_reason"].startswith("the engine exited (code 1)"), summary["status_reason"]
    assert "logs/max-num-seqs=4.log" in summary["status_reason"]
    sent = summary["requests"]["completed"] + summary["requests"]["failed"]
    assert summary["requests"]["completed"] >= 20 and sent < 100, summary["requests"]
    assert "the engine exited (code 1): stopping the load" in got.stderr
    assert "error: no cell completed (1 partial, 0 failed): engine exited with code 1 during the run" in got.stderr
