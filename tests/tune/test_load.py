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
    "name": "t",
    "load": {"concurrency": 2, "duration_s": 2},
    "workload": {
        "classes": [{"name": "a", "input_tokens": 32, "output_tokens": {"dist": "uniform", "min": 8, "max": 16}}]
    },
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
    bad = {
        **good(),
        "engine": {"kind": "sim", "portt": 1},
        "load": {"concurrency": 4, "rate": 2},
        "steps": ["baseline", "warp-speed"],
        "measure": {"duration_s": -1},
        "budgett": {},
    }
    path = write(tmp_path, bad)
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "tune", str(path), "--plan"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
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
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "tune", str(path), "--plan"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    for step in (
        "context-length",
        "gpu-memory",
        "baseline",
        "max-num-seqs",
        "cuda-graphs",
        "max-num-batched-tokens",
        "cache-check",
        "kv-dtype",
        "parallelism",
        "speculative",
        "final",
    ):
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


@pytest.mark.parametrize(
    "patch, says",
    [
        ({"load": {"concurrency": True}}, "load.concurrency: must be a valid integer"),  # ran at 1 user
        ({"load": {"concurrency": "4"}}, "load.concurrency: must be a valid integer"),
        ({"load": {"concurrency": 10_000_000}}, "load.concurrency: 10,000,000 concurrent users is above the limit"),
        ({"load": {"rate": float("inf")}}, "load.rate: must be a finite number"),
        (
            {"load": {"concurrency": 4, "capacity_levels": [1e308]}},
            "load.capacity_levels[0]: must be less than or equal to 100",
        ),
        (
            {"load": {"concurrency": 400, "capacity_levels": [80]}},
            "capacity_levels: the highest level is 32,000 concurrent users",
        ),
        (
            {"measure": {"warmup_s": float("inf")}},
            "measure.warmup_s: must be a finite number",
        ),  # failed the baseline step
        (
            {"measure": {"duration_s": 1e300}},
            "measure.duration_s: 1e+300 seconds is above the limit of 604,800 (set HARNESS_MAX_DURATION_S=N",
        ),
        ({"measure": {"repeats": 10**12}}, "measure.repeats: must be less than or equal to 100"),
        (
            {"engine": {"kind": "sim", "ready_timeout_s": float("inf")}},
            "engine.ready_timeout_s: must be a finite number",
        ),
        ({"gpus": 10**20}, "gpus: must be less than or equal to 1024"),
        (
            {"context": {"max_model_len": 10**30}},
            "context.max_model_len: 1e+30 tokens in one request is above the limit",
        ),
        ({"candidates": {"max-num-seqs": [8, float("nan")]}}, "candidates.max-num-seqs[1]: must be a finite number"),
    ],
)
def test_hostile_values_are_one_line_each(tmp_path: Path, patch: dict, says: str) -> None:
    """Audit R13: tune files were not strict like scenario and sweep files."""
    path = write(tmp_path, {**good(), **patch})
    with pytest.raises(UserError) as exc:
        load_tune(path)
    assert len(exc.value.lines) == 1 and says in exc.value.lines[0], exc.value.lines


def test_a_workload_that_is_a_device_or_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    """Audit R14/R17: a symlink loop ended `internal error: RuntimeError: Symlink loop`, exit 70, and
    /dev/zero read as "no such file"; the same for a sweep's scenarios."""
    (tmp_path / "loop_a.yaml").symlink_to(tmp_path / "loop_b.yaml")
    (tmp_path / "loop_b.yaml").symlink_to(tmp_path / "loop_a.yaml")
    path = write(tmp_path, {**good(), "workload": ["loop_a.yaml", "/dev/zero"]})
    with pytest.raises(UserError) as exc:
        load_tune(path)
    assert exc.value.lines == [
        f"{path}: workload[0]: loop_a.yaml: cannot read it (Too many levels of symbolic links) (paths are relative to the tune file)",
        f"{path}: workload[1]: /dev/zero: is a device, a pipe or a socket, not a file (paths are relative to the tune file)",
    ]
    from harness.sweep.plan import build_plan

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "name": "s",
                "engine": {"kind": "sim"},
                "scenarios": ["loop_a.yaml", "/dev/zero"],
                "vary": {"flags": {"max-num-seqs": [4]}},
            }
        )
    )
    with pytest.raises(UserError) as exc:
        build_plan(sweep)
    assert [line.split(": ", 3)[3] for line in exc.value.lines] == [
        "cannot read it (Too many levels of symbolic links) (paths are relative to the sweep file)",
        "is a device, a pipe or a socket, not a file (paths are relative to the sweep file)",
    ]


def test_a_guide_name_the_kind_spells_otherwise_is_refused_with_its_spelling(tmp_path: Path) -> None:
    """A tune file's flags are the engine's own: vLLM's `max-num-seqs` on SGLang would fail every start
    (`unrecognized arguments`), a TGI count limit does not exist; each is one line naming the spelling."""
    data = {
        **good(),
        "engine": {"kind": "sglang"},
        "base": {"max-num-seqs": 8, "max-running-requests": 8},
        "candidates": {"enable-prefix-caching": [False], "mem-fraction-static": [0.8]},
    }
    path = write(tmp_path, data)
    with pytest.raises(UserError) as exc:
        load_tune(path)
    assert exc.value.lines == [
        f"{path}: base.max-num-seqs: engine kind sglang spells --max-num-seqs as --max-running-requests; "
        "write max-running-requests",
        f"{path}: candidates.enable-prefix-caching: engine kind sglang spells --enable-prefix-caching as "
        "--disable-radix-cache (on: without --disable-radix-cache; off: --disable-radix-cache (default on)); "
        "write disable-radix-cache",
    ]
    tgi = write(tmp_path, {**good(), "engine": {"kind": "tgi"}, "candidates": {"max-num-seqs": [8]}})
    with pytest.raises(UserError) as exc:
        load_tune(tgi)
    assert len(exc.value.lines) == 1
    assert exc.value.lines[0].startswith(
        f"{tgi}: candidates.max-num-seqs: engine kind tgi has no equivalent of --max-num-seqs"
    )


def test_the_plan_shows_each_steps_flag_in_the_kinds_spelling(tmp_path: Path) -> None:
    path = write(tmp_path, {**good(), "engine": {"kind": "llamacpp"}, "candidates": {"parallel": [2, 4]}})
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "tune", str(path), "--plan"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln.strip() for ln in proc.stdout.splitlines()]
    for line in (
        "max-model-len -> llamacpp --kv-unified-per-slot",
        "max-num-seqs -> llamacpp --parallel",
        "max-num-batched-tokens -> llamacpp --batch-size",
        "cuda-graphs -> llamacpp on: without env GGML_CUDA_DISABLE_GRAPHS; off: env GGML_CUDA_DISABLE_GRAPHS=1 (default on)",
        "enable-prefix-caching -> llamacpp on: --cache-prompt; off: --no-cache-prompt (default on)",
        "kv-cache-dtype -> llamacpp --cache-type-k + --cache-type-v; tries q8_0 unless candidates are listed",
        "speculative-config -> llamacpp --spec-type + --model-draft + --spec-draft-n-max",
    ):
        assert line in lines, proc.stdout
    gpu = next(ln for ln in lines if ln.startswith("gpu-memory-utilization ->"))
    assert gpu.startswith(
        "gpu-memory-utilization -> engine kind llamacpp has no equivalent (llama-server has no memory"
    )
    assert gpu.endswith(": the step only checks that the engine starts")
    tp = next(ln for ln in lines if ln.startswith("tensor-parallel-size ->"))
    assert tp.endswith(": the step is skipped, nothing started")
