"""Sweep `loads` end to end on the simulated engine, through the real CLI, runner and report: the
shipped speculative-decoding sweep at two loads. One engine start per config; per-level cells in
index.json and summary.csv; configs ranked at each load separately; the report joins each config's
levels into a curve. The simulated GPU shows the guide's point: speculation wins at low
concurrency and loses once big batches are compute-bound.

Slow (-m slow: two engines at 64 users, 35-50 s of CPU). The fast suite keeps each part, cheaper:
the lesson from the cost model (tests/sim/test_sim_model_units.py), load levels on one engine with
per-level cells and the report's per-config curves (tests/sweep/test_external_sim.py), ranking per
level (tests/sweep/test_results.py)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from simlag import retry_on_sim_lag

from harness.report.build import build_sweep_report
from harness.report.sweep_data import load_sweep

SHIPPED = Path(__file__).resolve().parents[2] / "scenarios" / "sweeps" / "sim_spec_decode_load.yaml"


def _sweep_and_lesson(work: Path):
    """One sweep at concurrency 1 and 64; asserts the guide's lesson on the simulated GPU."""
    work.mkdir(parents=True)
    sweep = yaml.safe_load(SHIPPED.read_text())
    sweep["scenarios"] = [str((SHIPPED.parent / s).resolve()) for s in sweep["scenarios"]]
    sweep["loads"] = {"load.concurrency": [1, 64]}
    sweep["overrides"] = {"load.duration_s": 4, "warmup.duration_s": 1}
    path = work / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    out = work / "out"

    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "sweep", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stderr.count("▶ start") == 2  # the load changes without a restart

    cells = json.loads((out / "index.json").read_text())["cells"]
    assert [(c["config_id"], c["load_level"], c["status"]) for c in cells] == [
        ("no-spec", "concurrency=1", "complete"),
        ("no-spec", "concurrency=64", "complete"),
        ("ngram-k3", "concurrency=1", "complete"),
        ("ngram-k3", "concurrency=64", "complete"),
    ]
    assert cells[1]["load"] == {"load.concurrency": 64}
    rows = {(r["config_id"], r["load_level"]): r for r in csv.DictReader((out / "summary.csv").open())}
    assert len(rows) == 4

    # each level ranked on its own: the closing table has one block per level
    assert "scenario short_prompt_long_output @ concurrency=1: configs ranked" in proc.stdout
    assert "scenario short_prompt_long_output @ concurrency=64: configs ranked" in proc.stdout

    e2e = {k: float(r["e2e_p50_ms"]) for k, r in rows.items()}
    low = e2e[("ngram-k3", "concurrency=1")] / e2e[("no-spec", "concurrency=1")]
    high = e2e[("ngram-k3", "concurrency=64")] / e2e[("no-spec", "concurrency=64")]
    print(f"\nE2E p50 ratio ngram-k3 / no-spec: concurrency 1 {low:.2f}, concurrency 64 {high:.2f}")
    assert low < 0.7 and high > 1.0
    return out, proc, rows


@pytest.mark.slow
def test_spec_decoding_at_two_loads(tmp_path):
    pytest.importorskip("harness.sim.server")
    # the lesson rests on the simulator's timing: on a busy host it can fall behind its schedule
    # (audit N6); then the sweep is run once more, and a second miss fails with the lag figure
    out, proc, _rows = retry_on_sim_lag(_sweep_and_lesson, tmp_path)

    doc = build_sweep_report(load_sweep(out))
    lat = doc.figures["latency_vs_throughput"].figure
    assert len(lat.axes) == 3  # one column: the scenario file, not one per level
    for ax in lat.axes:
        curves = [ln for ln in ax.get_lines() if ln.get_label() == "_curve"]
        assert len(curves) == 4  # p50 and p99 curves of two configs
        assert all(len(ln.get_xdata()) == 2 for ln in curves)
        assert sorted(t.get_text() for t in ax.texts) == ["1 user", "1 user", "64 users", "64 users"]
    good = doc.figures["goodput"].figure.axes[0]
    assert [c.get_label() for c in good.containers] == ["concurrency=1", "concurrency=64"]
    assert "scenario short_prompt_long_output" in good.get_title()
    assert (out / "report.html").is_file()
    assert "capacity under the SLOs" in proc.stdout
    report = (out / "report.md").read_text()
    assert "## Capacity under the SLOs" in report and "| short_prompt_long_output | ngram-k3 |" in report
