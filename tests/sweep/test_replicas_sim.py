"""engine.replicas: "TP=2 x 1 engine" vs "TP=1 x 2 replicas" as one sweep on the simulated engine,
through the real CLI, executor, runner and report. Each replica gets its own port, {replica} and its
share of engine.devices as {devices}; the load is routed over the replicas; the index records
replicas and devices, and the report shows output tokens/s per device."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

from harness.sweep.plan import build_plan

SHIPPED = Path(__file__).resolve().parents[2] / "scenarios" / "sweeps" / "sim_tp_vs_replicas.yaml"


def test_devices_are_shared_out_to_replicas() -> None:
    plan = build_plan(SHIPPED)
    tp2, tp1x2 = plan.configs
    assert (tp2.replicas, tp2.devices, plan.devices_of(tp2, 0)) == (1, 2, "0,1")
    assert (tp1x2.replicas, tp1x2.devices) == (2, 2)
    assert [plan.devices_of(tp1x2, r) for r in (0, 1)] == ["0", "1"]
    argv = plan.command(tp1x2, 9001, 1)
    assert "9001" in argv


def test_tp2_vs_two_replicas(tmp_path: Path) -> None:
    sweep = yaml.safe_load(SHIPPED.read_text())
    sweep["scenarios"] = [str((SHIPPED.parent / s).resolve()) for s in sweep["scenarios"]]
    # the wiring is under test, not the figures: a short window at 8 users (the shipped 32 users for
    # 10 s cost ~35 s of CPU on 2 cores)
    sweep["overrides"] = {**sweep["overrides"], "load.duration_s": 2, "load.concurrency": 8, "warmup.duration_s": 0}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    out = tmp_path / "out"
    # --no-report: `harness report` below writes it (the sweep's own report was written twice)
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "sweep", str(path), "--out", str(out), "--no-report"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cells = {c["config_id"]: c for c in json.loads((out / "index.json").read_text())["cells"]}
    assert cells["tp2x1"]["devices"] == 2 and "replicas" not in cells["tp2x1"]
    assert cells["tp1x2"]["replicas"] == 2 and cells["tp1x2"]["devices"] == 2
    assert len(cells["tp1x2"]["endpoints"]) == 2
    assert (out / "logs" / "tp1x2.r1.log").is_file()
    run = json.loads((out / cells["tp1x2"]["run_dir"] / "summary.json").read_text())
    eps = run["groups"]["endpoint"]
    assert len(eps) == 2 and all(b["requests"]["completed"] > 0 for b in eps.values())
    assert sum(b["requests"]["completed"] for b in eps.values()) == run["requests"]["completed"]
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "report", str(out)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    md = (out / "report.md").read_text()
    assert "out tok/s per device" in md and "2 x 1" in md and "1 x 2" in md
