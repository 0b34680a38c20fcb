"""Runs of `harness run` against the built-in simulated engine (real HTTP, real files)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def start_harness(out: Path, scenario: str, sim_args: str, *extra: str) -> subprocess.Popen[str]:
    """`harness run` in a subprocess (several may share the machine alike)."""
    path = out.parent / f"{out.name}.yaml"
    path.write_text(scenario)
    cmd = [
        sys.executable,
        "-m",
        "harness.cli.main",
        "run",
        str(path),
        "--out",
        str(out),
        "--quiet",
        "--sim-args",
        sim_args,
        *extra,
    ]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str], out: Path, timeout: float = 180) -> dict[str, Any]:
    """Wait; returns summary.json (written whatever the exit status)."""
    text, _ = proc.communicate(timeout=timeout)
    assert (out / "summary.json").is_file(), f"no summary (rc {proc.returncode}):\n{text[-4000:]}"
    return json.loads((out / "summary.json").read_text())


def run_harness(out: Path, scenario: str, sim_args: str, *extra: str, timeout: float = 180) -> dict[str, Any]:
    return finish(start_harness(out, scenario, sim_args, *extra), out, timeout)
