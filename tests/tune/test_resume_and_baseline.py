"""A tune stopped before its first step landed resumes (audit R6), and a tune never replaces another
tune's baseline of the same name without --force (audit N17)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from report.fabricate import make_sweep

from harness.tune.driver import Tuner
from harness.tune.load import load_tune

ROOT = Path(__file__).resolve().parents[2]


def _files(tmp: Path, engine: dict) -> Path:
    (tmp / "tiny.yaml").write_text(
        json.dumps(
            {
                "name": "tiny",
                "load": {"concurrency": 2, "duration_s": 2},
                "workload": {"classes": [{"name": "q", "input_tokens": 64, "output_tokens": 16}]},
            }
        )
    )
    path = tmp / "tune.yaml"
    path.write_text(
        json.dumps(
            {
                "name": "twice",
                "engine": engine,
                "workload": ["tiny.yaml"],
                "load": {"concurrency": 2},
                "measure": {"duration_s": 2, "warmup_s": 0},
                "steps": ["baseline", "final"],
            }
        )
    )
    return path


def test_a_tune_killed_before_tune_json_resumes(tmp_path: Path) -> None:
    """What a kill -9 in the first step leaves: tune.yaml, cost.json, steps/, no tune.json. --resume
    was refused ("no tune.json there") and --out "not empty": a dead end. It resumes now (here an
    engine that cannot start makes the tune short: the baseline step fails, exit 1, tune.json written)."""
    path = _files(
        tmp_path, {"kind": "custom", "command": ["false", "{port}"], "ready_timeout_s": 5, "stop_timeout_s": 2}
    )
    out = tmp_path / "out"
    (out / "steps").mkdir(parents=True)
    shutil.copy(path, out / "tune.yaml")
    (out / "cost.json").write_text("{}")
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "tune", str(path), "--resume", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert "no tune.json" not in proc.stderr and proc.returncode == 1, proc.stderr
    doc = json.loads((out / "tune.json").read_text())
    assert (
        doc["status"] == "failed" and doc["steps"][0]["step"] == "baseline" and doc["steps"][0]["verdict"] == "failed"
    )
    # a directory with neither tune.json nor tune.yaml is not a tune's
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "tune", str(path), "--resume", str(tmp_path / "steps")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "no tune.json or tune.yaml there" in proc.stderr


def test_a_second_tune_keeps_the_first_ones_baseline_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_BASELINES", str(tmp_path / "store"))
    spec = load_tune(_files(tmp_path, {"kind": "sim"}))

    def save(out: Path, final_sweep: Path, force: bool = False) -> dict | None:
        tuner = Tuner(spec, out, show_progress=False, force=force)
        (out / "recommended.yaml").write_text("base: {}\n")
        tuner.ctx.final = SimpleNamespace(ok=True, sweep_dir=final_sweep)
        return tuner._save_baseline()

    meta = tmp_path / "store" / "tune-twice" / "baseline.json"
    first = make_sweep(tmp_path / "a" / "steps" / "11-final", failed_config=None)
    assert save(tmp_path / "a", first)["name"] == "tune-twice"
    assert json.loads(meta.read_text())["source"] == str(first.resolve())
    # another tune of the same name: the first one's baseline stays, and the console says so
    second = make_sweep(tmp_path / "b" / "steps" / "11-final", failed_config=None, speed_scale=2.0)
    assert save(tmp_path / "b", second) is None
    err = capsys.readouterr().err
    assert "note: baseline 'tune-twice' exists" in err and "kept it" in err and "--force" in err
    assert json.loads(meta.read_text())["source"] == str(first.resolve())
    # the first tune resumed: its own baseline is replaced, no note
    assert save(tmp_path / "a", first)["name"] == "tune-twice" and "kept it" not in capsys.readouterr().err
    # --force: replaced
    assert save(tmp_path / "b", second, force=True)["name"] == "tune-twice"
    assert json.loads(meta.read_text())["source"] == str(second.resolve())
