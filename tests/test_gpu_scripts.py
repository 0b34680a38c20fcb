"""bench/gpu/h200x2_tp_vs_replicas.sh (issue 30, waiting for a two-GPU device): its dry run prints
what each phase would start, with one GPU per replica and NVLink multicast off, and checks the
sweep and tune files through the harness's own --plan; shellcheck finds nothing in it or in
bench/gpu/h200_vllm.sh, which share their helpers through bench/gpu/lib.sh."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "gpu" / "h200x2_tp_vs_replicas.sh"


def dry(tmp_path: Path, *phases: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "H200_WORK": str(tmp_path / "w"), "PYTHONPATH": str(ROOT)}
    env.pop("OUT", None)
    bin_dir = tmp_path / "bin"  # `python3` is the interpreter running the tests
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", *phases], capture_output=True, text=True, env=env, timeout=300
    )


def test_dry_run_prints_every_phase_and_starts_nothing(tmp_path):
    r = dry(tmp_path, "model", "smoke", "sweep", "tune")
    assert r.returncode == 0, r.stderr + r.stdout
    out = r.stdout
    # smoke: tp 2 on both GPUs, then one tp-1 engine per GPU
    assert "CUDA_VISIBLE_DEVICES=0\\,1 python3 -m vllm.entrypoints.cli.main serve" in out
    assert "--tensor-parallel-size 2" in out
    assert "CUDA_VISIBLE_DEVICES=0 python3" in out and "CUDA_VISIBLE_DEVICES=1 python3" in out
    # the harness's plans ran: 12 cells, 3 starts; replicas share the devices out; multicast off in the engine env
    assert "= 12 cell(s), 3 engine start(s)" in out
    assert "x 2 replicas" in out and "2 device(s) in all" in out
    assert "NCCL_NVLS_ENABLE=0" in out
    assert "target.routing=round-robin" in out and "target.routing=prefix-affinity" in out
    assert "2. parallelism" in out
    assert (
        "sweep bench/gpu/vllm/tp_vs_replicas.yaml --out" in out
        and "tune bench/gpu/vllm/tune_parallelism.yaml --out" in out
    )
    assert not (tmp_path / "w" / "sweep").exists()  # nothing ran


def test_unknown_phase_is_refused(tmp_path):
    r = dry(tmp_path, "bogus")
    assert r.returncode == 2 and "unknown phase bogus" in r.stderr


ONE_GPU = ROOT / "bench" / "gpu" / "h200_vllm.sh"
LIB = ROOT / "bench" / "gpu" / "lib.sh"


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("script", [SCRIPT, ONE_GPU], ids=lambda p: p.name)
def test_shellcheck_is_clean(script):
    # -x: follow `source .../lib.sh`, so the helpers and the variables they read are checked together
    r = subprocess.run(["shellcheck", "-x", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_both_scripts_take_the_shared_helpers_from_lib():
    """The helpers are defined once, in bench/gpu/lib.sh (they had drifted apart as two copies)."""
    shared = re.findall(r"^([a-z_]+)\(\) \{", LIB.read_text(), flags=re.M)
    assert {"say", "left", "x", "within", "pack_one", "wait_model", "dir_args", "done_or_run"} <= set(shared)
    for script in (SCRIPT, ONE_GPU):
        text = script.read_text()
        assert 'source "$REPO/bench/gpu/lib.sh"' in text
        assert not [f for f in shared if re.search(rf"^{f}\(\) \{{", text, flags=re.M)], script.name


def test_one_gpu_usage_is_the_header():
    r = subprocess.run(["bash", str(ONE_GPU)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert (
        r.stdout.splitlines()[-1] == "# Helpers shared with bench/gpu/h200x2_tp_vs_replicas.sh are in bench/gpu/lib.sh."
    )
