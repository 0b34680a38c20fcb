"""The tune file is strict: every problem is one line naming the file and field path (exit 2),
never a traceback; `external` is refused (tuning restarts the engine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.errors import UserError
from harness.tune.load import load_tune

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = {
    "name": "t", "load": {"concurrency": 2, "duration_s": 2},
    "workload": {"classes": [{"name": "a", "input_tokens": 32, "output_tokens": {"dist": "uniform", "min": 8, "max": 16}}]},
}


def write(tmp_path: Path, data: dict) -> Path:
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SCENARIO))
    p = tmp_path / "tune.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def good() -> dict:
    return {"name": "x", "engine": {"kind": "sim"}, "workload": ["s.yaml"], "load": {"concurrency": 4}}


def test_valid_file_derives_the_context_length(tmp_path):
    spec = load_tune(write(tmp_path, good()))
    assert spec.max_model_len == 64  # 32 input + 16 output at most + 16 for the chat template (one message)
    assert spec.file.step_order()[0] == "context-length" and spec.file.step_order()[-1] == "final"


def test_every_problem_is_one_line_with_its_field_path(tmp_path):
    bad = {**good(), "engine": {"kind": "sim", "portt": 1}, "load": {"concurrency": 4, "rate": 2},
           "steps": ["baseline", "warp-speed"], "measure": {"duration_s": -1}, "budgett": {}}
    path = write(tmp_path, bad)
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "tune", str(path), "--plan"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [ln.removeprefix("error: ") for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 5, proc.stderr
    assert any("engine.portt: unknown key" in ln for ln in lines)
    assert any(ln.startswith(f"{path}: load:") and "one of concurrency" in ln for ln in lines)
    assert any("steps" in ln and "warp-speed" in ln for ln in lines)
    assert any("measure.duration_s" in ln for ln in lines)
    assert any("budgett: unknown key" in ln for ln in lines)


def test_external_engine_is_refused(tmp_path):
    data = {**good(), "engine": {"kind": "external", "url": "http://127.0.0.1:9"}}
    with pytest.raises(UserError) as exc:
        load_tune(write(tmp_path, data))
    assert "engine: " in exc.value.lines[0] and "external is refused" in exc.value.lines[0]


def test_workload_problems_are_collected(tmp_path):
    data = {**good(), "workload": ["s.yaml", "missing.yaml"], "context": {"max_model_len": 20}}
    with pytest.raises(UserError) as exc:
        load_tune(write(tmp_path, data))
    text = "\n".join(exc.value.lines)
    assert len(exc.value.lines) == 2
    assert "workload[1]: missing.yaml: no such file" in text
    assert "context.max_model_len: 20 is shorter than the workload's longest request (64 tokens: " in text


def test_plan_starts_nothing_and_lists_the_steps(tmp_path):
    path = write(tmp_path, {**good(), "candidates": {"max-num-seqs": [8, 16]}})
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "tune", str(path), "--plan"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for step in ("context-length", "gpu-memory", "baseline", "max-num-seqs", "cuda-graphs", "max-num-batched-tokens",
                 "cache-check", "kv-dtype", "parallelism", "speculative", "final"):
        assert f". {step}:" in proc.stdout
    assert "max-num-seqs: 8, 16" in proc.stdout
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios" / "tune").glob("*_*.yaml")), ids=lambda p: p.name)
def test_shipped_tune_files_load(path):
    data = yaml.safe_load(path.read_text())
    if "engine" not in data:
        pytest.skip("a workload scenario, not a tune file")
    spec = load_tune(path)
    assert spec.scenarios and spec.max_model_len > 0
