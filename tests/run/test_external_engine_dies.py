"""An external engine that dies mid-run fails the run (audit R15): 39 requests done, then 14 refused
connections, ended `status: complete`, exit 0, with only a "28% failed" warning. A dying built-in
simulator is caught by its exit code; a server the harness did not start, by its refused connections."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.run.provider import TargetProvider

ROOT = Path(__file__).resolve().parents[2]


def test_an_external_engine_that_dies_mid_run_fails_the_run(tmp_path: Path) -> None:
    targets = TargetProvider(["--sim-speed", "8", "--fault-crash-after-requests", "12"], tmp_path / "engine")
    engine = targets.start()
    try:
        scenario = tmp_path / "s.yaml"
        scenario.write_text(
            json.dumps(
                {
                    "name": "dies",
                    "load": {"concurrency": 2, "duration_s": 4},
                    "workload": {"classes": [{"name": "a", "input_tokens": 32, "output_tokens": 8}]},
                }
            )
        )
        out = tmp_path / "run"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "run",
                str(scenario),
                "--target",
                engine.url,
                "--out",
                str(out),
                "--no-telemetry",
                "--no-report",
                "--quiet",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
    finally:
        targets.close()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["completed"] > 0 and summary["requests"]["errors_by_kind"].get("connect", 0) > 0
    assert proc.returncode == 1, proc.stderr
    assert summary["status"] == "failed"
    assert summary["status_reason"].startswith(f"the target {engine.url} stopped accepting connections during the run")
    assert f"error: the target {engine.url} stopped accepting connections" in proc.stderr
