"""`harness sweep --capacity-search`: after each config's cells, with its engine still up, the
capacity search runs against it; twice the sequence slots carry about twice the rate.

Simulated engine slowed down (`--sim-speed 0.1`: ~88 ms steps) so the boundaries come from the
cost model (4 slots: ~2.7 req/s, 8 slots: ~5 req/s for 16-token outputs), not from this box."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two configs x up to 5 trials of 5 s: about 3 minutes on 2 shared cores
def test_a_sweep_searches_each_configs_capacity(tmp_path):
    (tmp_path / "cap.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "cap",
                "seed": 3,
                "load": {"rate": 1.5, "arrival": "constant", "duration_s": 5},
                "warmup": {"duration_s": 0},
                "slo": {"ttft_ms": 600},
                "telemetry": {"enabled": False},
                "workload": {"classes": [{"name": "c", "input_tokens": 16, "output_tokens": 16}]},
            }
        )
    )
    (tmp_path / "sweep.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "capsweep",
                "engine": {"kind": "sim", "ready_timeout_s": 60},
                "base": {"sim-speed": 0.1, "disable-log-stats": True, "max-num-seqs": 4},
                "vary": {"flags": {"max-num-seqs": [8]}},
                "scenarios": ["cap.yaml"],
            },
            sort_keys=False,
        )
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "sweep",
            str(tmp_path / "sweep.yaml"),
            "--out",
            str(out),
            "--capacity-search",
            "--capacity-precision",
            "0.3",
            "--capacity-max-trials",
            "5",
            "--no-report",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = json.loads((out / "capacity.json").read_text())
    assert set(found) == {"base", "max-num-seqs=8"}, found.keys()
    four, eight = found["base"], found["max-num-seqs=8"]
    for res, cid in ((four, "base"), (eight, "max-num-seqs=8")):
        assert res["boundary"] is not None and res["first_failing"] is not None, res
        assert 2 <= len(res["trials"]) <= 5
        for t in res["trials"]:  # every trial a normal run directory under the sweep
            assert (
                Path(t["run_dir"]).is_relative_to(out / "capacity" / cid)
                and (Path(t["run_dir"]) / "summary.json").is_file()
            )
    assert eight["boundary"] > four["boundary"], (four["boundary"], eight["boundary"])
    assert "capacity max-num-seqs=8: capacity under the SLOs" in proc.stdout


def test_capacity_search_without_an_slo_is_one_line(tmp_path):
    (tmp_path / "s.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "s",
                "load": {"rate": 1, "duration_s": 2},
                "workload": {"classes": [{"name": "c", "input_tokens": 8, "output_tokens": 8}]},
            }
        )
    )
    (tmp_path / "sweep.yaml").write_text(
        yaml.safe_dump({"name": "x", "engine": {"kind": "sim"}, "scenarios": ["s.yaml"]})
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "sweep",
            str(tmp_path / "sweep.yaml"),
            "--out",
            str(tmp_path / "o"),
            "--capacity-search",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--capacity-search needs an SLO" in lines[0], proc.stderr
