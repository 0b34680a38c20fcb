"""On real `harness run` output (built-in simulated engine): the report renders every figure,
compare passes a like-for-like rerun and fails the same engine at a lower speed factor."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.main import main

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "smoke.yaml"


@pytest.fixture(scope="module")
def sim_runs(tmp_path_factory):
    if not SCENARIO.is_file():
        pytest.skip(f"{SCENARIO} is missing")
    root = tmp_path_factory.mktemp("sim_runs")
    variants = {"base": "", "again": "", "slow": "--sim-speed 0.5"}
    procs = {}
    for name, sim_args in variants.items():  # the three runs share the machine alike
        cmd = [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(SCENARIO),
            "--out",
            str(root / name),
            "--duration",
            "5",
            "--quiet",
            "--no-report",
            "--sim-args",
            sim_args,
        ]
        procs[name] = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"harness run ({name}) failed:\n{out[-3000:]}"
    return root


def test_report_of_a_real_run(sim_runs, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(sim_runs / "base"), "--out", str(out)]) == 0
    for name in ("ttft", "itl", "over_time"):
        assert (out / "report_files" / f"{name}.png").stat().st_size > 5000, name
    md = (out / "report.md").read_text()
    assert "KV cache occupancy" in md and "TTFT p99 (ms)" in md and "ITL per token p50 (ms)" in md
    assert "histograms.json is missing" not in md


def test_compare_real_runs(sim_runs, capsys):
    assert (
        main(
            [
                "compare",
                str(sim_runs / "base"),
                str(sim_runs / "again"),
                "--metrics",
                "ttft.p50,itl.p50,tpot.p50,e2e.p50,output_tps",
            ]
        )
        == 0
    ), capsys.readouterr().out
    capsys.readouterr()
    assert main(["compare", str(sim_runs / "base"), str(sim_runs / "slow")]) == 1
    out = capsys.readouterr().out
    for label in ("ITL p50", "TPOT p50", "output tokens/s"):
        assert next(ln for ln in out.splitlines() if ln.startswith(label)).rstrip().endswith("REGRESSION"), out
