"""The web UI plugin over HTTP (no browser): tests started and stopped the way Locust's page does.

One `harness ui` per test against the simulated engine (tests/ui/webui.py): the form's POST /swarm
starts a run, the LLM rows appear in /stats/requests (extended_stats) and /llm/api/live, Stop
drains in-flight requests, and the run directory holds the same files as `harness run`, with the
live numbers equal to summary.json's. Runs spread over worker processes: test_web_workers.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from webui import ROOT, assert_cards_are_the_summary, llm_rows, started_uis

from harness.run.target import free_port

LOCUSTFILE = ROOT / "harness" / "ui" / "locustfile.py"


@pytest.fixture
def ui_factory(tmp_path: Path):
    yield from started_uis(tmp_path)


def test_start_from_form_live_rows_stop_and_run_directory(ui_factory) -> None:
    ui = ui_factory()
    live = ui.get("/llm/api/live")
    assert live["simulated"] and live["host"].startswith("http://127.0.0.1:")
    page = urllib.request.urlopen(ui.base + "/", timeout=10).read().decode()
    args = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
    assert [t["key"] for t in args["extended_tabs"]] == ["llm", "llm_run"]
    assert args["num_users"] == 4  # the form's default: the scenario's concurrency
    assert {"scenario", "measured_window", "open_loop_rate", "warmup"} <= set(args["extra_options"])

    # the form: users, spawn rate, host, and the plugin's fields ("0" = measure until Stop)
    res = ui.post(
        "/swarm",
        {
            "user_count": "4",
            "spawn_rate": "4",
            "host": live["host"],
            "measured_window": "0",
            "scenario": live["scenario_path"],
        },
    )
    assert res.get("success"), res
    ui.wait_for(
        lambda: any(r["cls"] == "All classes" and r["requests"] not in ("0", "") for r in llm_rows(ui)[0]),
        40,
        "LLM rows with finished requests",
    )
    rows, run_rows = llm_rows(ui)
    assert [r["cls"] for r in rows][-1] == "All classes" and {"chat", "rag"} <= {r["cls"] for r in rows}
    total = rows[-1]
    assert float(total["ttft_p50"].replace(",", "")) > 0 and float(total["itl_p99"].replace(",", "")) > 0
    assert dict((r["item"], r["value"]) for r in run_rows)["State"] == "measuring"
    live = ui.get("/llm/api/live")
    assert live["state"] == "measuring" and live["engine"]["enabled"] and live["workers"] == 1
    ui.wait_for(lambda: len(ui.get("/llm/api/live")["series"]["t"]) >= 2, 10, "chart points")

    ui.post("/stop")  # returns once every request in flight has finished and been reported
    ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "finished", 30, "the run to be written")
    live = ui.get("/llm/api/live")
    run = Path(live["run_dir"])
    for name in (
        "summary.json",
        "histograms.json",
        "requests.jsonl",
        "scenario.yaml",
        "load_result.json",
        "engine_metrics.jsonl",
        "load_plan.json",
    ):
        assert (run / name).exists(), name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "complete"  # "until Stop": stopping is the normal end
    assert summary["load"]["until_stopped"] is True and summary["client"]["cut_at_end"] == 0
    # host stalls are measured in a process of their own (threads are greenlets under Locust)
    assert summary["timing"]["stall_meter"]["wakeup_late_p99_ms"] is not None
    assert "stalls_in_window" in summary["timing"]["stall_meter"]
    reqs = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in reqs if not r["warmup"]]
    assert summary["requests"]["completed"] == len([r for r in measured if r["error"] is None]) > 0
    # the live view is the lossless merge of the workers' deltas: the same numbers as summary.json
    all_row = live["classes"][-1]
    assert all_row["requests"] == summary["requests"]["completed"]
    for metric, key in (("ttft", "ttft"), ("itl_token", "itl"), ("tpot", "tpot")):
        for p in ("p50", "p90", "p99"):
            assert all_row[key][p] == pytest.approx(summary["latency_ms"][metric][p], rel=1e-9), (metric, p)
    assert live["final"]["rps"] == pytest.approx(summary["requests"]["rps"])
    # finished: the engine cards and the run tab show the measured window, not the idle engine (audit D14)
    eng = summary["engine"]
    assert live["engine"]["over"] and live["engine"]["kv_usage"] == eng["kv_usage"]["max"]
    assert live["engine"]["preemptions"] == eng["preemptions"]["count"]
    window_row = dict((r["item"], r["value"]) for r in llm_rows(ui)[1])["Measured window"]
    assert window_row.startswith(f"{summary['window']['duration_s']:,.1f} s (incl. drain)"), window_row
    assert live["summary_url"].endswith(f"/llm/runs/{run.name}/summary.json")
    served = ui.get(live["summary_url"])
    assert served["requests"]["completed"] == summary["requests"]["completed"]


def test_without_a_scenario_the_plugin_says_how_to_give_one(tmp_path: Path) -> None:
    # importing never needs a scenario (in a child: Locust's import monkey-patches the process)
    imp = subprocess.run(
        [sys.executable, "-c", "import harness.ui.locustfile"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert imp.returncode == 0, imp.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert "no scenario given. Pass --scenario FILE" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_target_that_is_down_is_reported_in_the_ui_not_as_user_errors(ui_factory) -> None:
    ui = ui_factory("--target", f"http://127.0.0.1:{free_port()}")  # the target is fixed at start, never by the form
    res = ui.post("/swarm", {"user_count": "2", "spawn_rate": "2", "host": ui.get("/llm/api/live")["host"]})
    assert res.get("success"), res
    ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "error", 30, "the error state")
    live = ui.get("/llm/api/live")
    assert any("cannot connect" in line for line in live["error"]), live["error"]
    ui.wait_for(lambda: ui.get("/llm/api/live")["locust_state"] == "stopped", 20, "the test to be stopped")
    _rows, run_rows = llm_rows(ui)
    assert dict((r["item"], r["value"]) for r in run_rows)["State"] == "error"
    assert "Traceback" not in Path(ui.log.name).read_text()


def test_every_ui_test_starts_with_a_cold_prefix_cache_and_ends_with_summary_json_figures(ui_factory) -> None:
    """Start a test, let it finish, start another: the second must not be served from the first's
    cached prompts (audit D2: the dashboard showed `Prefix hits 99.2 %`). Each window ends by
    itself, in one process with 16 users, and the cards then show summary.json's figures (audit
    N5: after `harness ui scenarios/mixed.yaml` finished, the cards and table said 150 requests
    and TTFT p99 488.9 ms while the banner, summary.json and report said 152 and 327 ms)."""
    ui = ui_factory()
    live = ui.get("/llm/api/live")
    summaries = []
    for _ in range(2):
        res = ui.post(
            "/swarm",
            {
                "user_count": "16",
                "spawn_rate": "16",
                "host": live["host"],
                "measured_window": "3",
                "scenario": live["scenario_path"],
            },
        )
        assert res.get("success"), res
        ui.wait_for(lambda: ui.get("/llm/api/live")["state"] in ("warmup", "measuring"), 30, "the test to start")
        ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "finished", 60, "the test to finish")
        live = ui.get("/llm/api/live")
        summaries.append(json.loads((Path(live["run_dir"]) / "summary.json").read_text()))
        assert_cards_are_the_summary(live, summaries[-1])
    second = summaries[1]
    assert second["prefix_cache_isolation"]["mode"] == "reset"
    assert second["engine"]["prefix_cache"]["hit_rate"] < 0.1, second["engine"]["prefix_cache"]
    assert summaries[0]["scenario"]["fingerprint"] == second["scenario"]["fingerprint"]
