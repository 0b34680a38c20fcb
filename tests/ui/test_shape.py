"""A Locust LoadTestShape with the harness plugin (issue 19 item 18): one summary block per stage.

Headless Locust with the plugin and a real shape file of three stages against the built-in
simulated engine: summary.json carries `groups.stage` (one block per stage, with its own TTFT/ITL
and rates over its own seconds) and `load.stages` (each stage's users and seconds), and the report
shows one row per stage instead of only one block that mixes the load levels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "harness" / "ui" / "locustfile.py"

SHAPE = ROOT / "scenarios" / "shapes" / "stages.py"  # the shipped example, stages from HARNESS_STAGES


def test_a_load_test_shape_gets_one_block_per_stage(tmp_path: Path) -> None:
    scenario = tmp_path / "staged.yaml"
    scenario.write_text(
        json.dumps(
            {
                "name": "staged",
                "load": {"concurrency": 2, "duration_s": 600},
                "workload": {
                    "classes": [
                        {"name": "chat", "input_tokens": 64, "output_tokens": {"dist": "uniform", "min": 8, "max": 24}}
                    ]
                },
            }
        )
    )
    results = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            f"{LOCUSTFILE},{SHAPE}",
            "--headless",
            "--scenario",
            str(scenario),
            "--results",
            str(results),
            "--measured-window",
            "0",
            "--sim-args",
            "--sim-speed 4",
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "HARNESS_STAGES": "2:2,4:6,6:3"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in results.iterdir() if (p / "summary.json").exists()]
    summary = json.loads((run / "summary.json").read_text())
    stages = summary["load"]["stages"]
    assert [s["users"] for s in stages] == [2, 6, 3]
    assert all(s["duration_s"] > 0 for s in stages)
    blocks = summary["groups"]["stage"]
    assert list(blocks) == ["1", "2", "3"]
    done = [blocks[k]["requests"]["completed"] for k in blocks]
    assert all(n > 0 for n in done) and sum(done) == summary["requests"]["completed"]
    for k, st in zip(blocks, stages, strict=True):
        b = blocks[k]
        assert b["latency_ms"]["ttft"]["count"] == b["requests"]["completed"]  # its own TTFT/ITL histograms
        assert b["latency_ms"]["itl_token"]["count"] > 0
        assert b["requests"]["rps"] == b["requests"]["completed"] / st["duration_s"]  # per its own seconds
    assert any("each stage has its own block" in w for w in summary["validity"]["warnings"]), summary["validity"]
    # users the shape removes (6 -> 3) finish their request instead of being killed mid-stream
    assert summary["client"]["cut_at_end"] == 0 and not any("cut" in w for w in summary["validity"]["warnings"])
    rep = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "report", str(run), "--format", "md"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert rep.returncode == 0, rep.stderr
    md = (run / "report.md").read_text()
    assert "Per LoadTestShape stage" in md
    table = md.split("Per LoadTestShape stage", 1)[1]
    for k, st in zip(blocks, stages, strict=True):
        assert f"| {k} | {st['users']} |" in table, table[:1500]
