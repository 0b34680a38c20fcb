"""Locust's own statistics count what summary.json counts (audit N16), as the audit ran it:
headless Locust with the plugin and `--csv`, a scenario with a warmup, against the built-in
simulated engine. Before, `Aggregated` was 56 = 52 measured + 4 warmup requests; then (CI) 354
against 402: Locust writes its CSV once a second and only closes it at exit, so the requests of
the test's last second were missing (harness.ui.final_csv writes the final rows). The counts
compared here do not depend on timing: every measured request is in both or the product is wrong."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "harness" / "ui" / "locustfile.py"


def test_locust_csv_and_aggregated_row_count_measured_requests_only(tmp_path: Path) -> None:
    scenario = tmp_path / "warm.yaml"
    scenario.write_text(
        json.dumps(
            {
                "name": "warm",
                "load": {"concurrency": 4, "duration_s": 3},
                "warmup": {"requests": 8},
                "workload": {"classes": [{"name": "chat", "input_tokens": 32, "output_tokens": 12}]},
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
            str(LOCUSTFILE),
            "--headless",
            "--scenario",
            str(scenario),
            "-u",
            "4",
            "-r",
            "4",
            "-t",
            "30s",
            "--results",
            str(results),
            "--csv",
            str(tmp_path / "loc"),
            "--sim-args",
            "--sim-speed 4",
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in results.iterdir() if (p / "summary.json").exists()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["client"]["warmup_requests"] >= 8
    measured = summary["requests"]["completed"] + summary["requests"]["failed"]
    rows = {r["Name"]: r for r in csv.DictReader((tmp_path / "loc_stats.csv").open())}
    assert set(rows) == {"chat e2e", "Aggregated"}, rows.keys()  # no "warmup chat e2e" row
    assert int(rows["Aggregated"]["Request Count"]) == measured
    assert int(rows["chat e2e"]["Request Count"]) == measured
    assert int(rows["Aggregated"]["Failure Count"]) == summary["requests"]["failed"]
    # the history file ends on the same final count
    history = list(csv.DictReader((tmp_path / "loc_stats_history.csv").open()))
    assert int(history[-1]["Total Request Count"]) == measured, history[-1]
    # Locust's RPS counts from the window: the same requests over about the same seconds
    rps = float(rows["Aggregated"]["Requests/s"])
    assert 0.7 * summary["requests"]["rps"] <= rps <= 1.3 * summary["requests"]["rps"], (
        rps,
        summary["requests"]["rps"],
    )
