"""The web UI plugin over HTTP (no browser): tests started and stopped the way Locust's page does.

One `harness ui` per test against the simulated engine: the form's POST /swarm starts a run, the
LLM rows appear in /stats/requests (extended_stats) and /llm/api/live, Stop drains in-flight
requests, and the run directory holds the same files as `harness run`, with the live numbers
equal to summary.json's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from waiting import wait_until

from harness.run.target import free_port

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "harness" / "ui" / "locustfile.py"


def _scenario(path: Path, duration_s: float = 600) -> Path:
    path.write_text(
        json.dumps(
            {
                "name": "webui",
                "load": {"concurrency": 4, "duration_s": duration_s},
                "warmup": {"requests": 2},
                "workload": {
                    "classes": [
                        {
                            "name": "chat",
                            "input_tokens": {"dist": "uniform", "min": 16, "max": 128},
                            "output_tokens": {"dist": "uniform", "min": 16, "max": 64},
                        },
                        {"name": "rag", "weight": 0.5, "input_tokens": 512, "output_tokens": 32},
                    ]
                },
            }
        )
    )
    return path


class UI:
    def __init__(self, tmp: Path, *extra: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.results = tmp / "results"
        self.log = open(tmp / "ui.log", "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "ui",
                str(_scenario(tmp / "webui.yaml")),
                "--web-port",
                str(self.port),
                "--results",
                str(self.results),
                "--sim-args",
                "--sim-speed 4",
                "--no-report",
                *extra,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
        self.wait_for(lambda: self.get("/llm/api/live")["state"] == "idle", 60, "the UI to come up")

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.base + path, timeout=10) as resp:
            return json.loads(resp.read())

    def post(self, path: str, form: dict[str, str] | None = None) -> dict:
        data = urllib.parse.urlencode(form or {}).encode()
        with urllib.request.urlopen(
            urllib.request.Request(self.base + path, data=data, method="POST"), timeout=120
        ) as r:
            body = r.read()
        try:
            return json.loads(body)
        except ValueError:
            return {}

    def wait_for(self, cond, timeout_s: float, what: str) -> None:
        def met():
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"the UI exited with {self.proc.returncode} while waiting for {what}; log:\n"
                    + Path(self.log.name).read_text()[-3000:]
                )
            try:
                return cond()
            except OSError:
                return False

        # `timeout_s` is a hang guard: the figures the callers pass (10-60 s) fit a quiet box, and a
        # busy one (load 22 here) took longer to reach the same state; never less than 120 s
        wait_until(
            met,
            what,
            timeout_s=max(timeout_s, 120.0),
            interval_s=0.25,
            details=lambda: "log:\n" + Path(self.log.name).read_text()[-3000:],
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


@pytest.fixture
def ui_factory(tmp_path: Path):
    made: list[UI] = []

    def make(*extra: str) -> UI:
        ui = UI(tmp_path, *extra)
        made.append(ui)
        return ui

    yield make
    for ui in made:
        ui.stop()


def _llm_rows(ui: UI) -> tuple[list[dict], list[dict]]:
    ext = {e["key"]: e["data"] for e in ui.get("/stats/requests")["extended_stats"]}
    return ext["llm"], ext["llm_run"]


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
        lambda: any(r["cls"] == "All classes" and r["requests"] not in ("0", "") for r in _llm_rows(ui)[0]),
        40,
        "LLM rows with finished requests",
    )
    rows, run_rows = _llm_rows(ui)
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
    window_row = dict((r["item"], r["value"]) for r in _llm_rows(ui)[1])["Measured window"]
    assert window_row.startswith(f"{summary['window']['duration_s']:,.1f} s (incl. drain)"), window_row
    assert live["summary_url"].endswith(f"/llm/runs/{run.name}/summary.json")
    served = ui.get(live["summary_url"])
    assert served["requests"]["completed"] == summary["requests"]["completed"]


def test_ui_with_two_worker_processes_merges_their_shares(ui_factory) -> None:
    ui = ui_factory("--processes", "2")
    ui.wait_for(
        lambda: '"worker_count": 2' in urllib.request.urlopen(ui.base + "/", timeout=10).read().decode(),
        30,
        "two workers",
    )
    live = ui.get("/llm/api/live")
    res = ui.post("/swarm", {"user_count": "4", "spawn_rate": "4", "host": live["host"], "measured_window": "3"})
    assert res.get("success"), res
    # the window ends by itself after 3 s: the run is written and the test stops without a click
    ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "finished", 45, "the run to finish on its own")
    live = ui.get("/llm/api/live")
    run = Path(live["run_dir"])
    summary = json.loads((run / "summary.json").read_text())
    shares = [json.loads((run / f"load_result.w{k}.json").read_text()) for k in (0, 1)]
    counts = [w["metrics"]["_all"]["counts"]["completed"] for w in shares]
    assert summary["client"]["processes"] == 2 and summary["status"] == "complete"
    assert all(n > 0 for n in counts) and summary["requests"]["completed"] == sum(counts)
    assert live["classes"][-1]["requests"] == sum(counts)
    _assert_cards_are_the_summary(live, summary)  # a run that ended by itself (audit N5)
    ui.wait_for(lambda: ui.get("/llm/api/live")["locust_state"] == "stopped", 20, "Locust to show the test stopped")


def test_a_run_that_ends_by_itself_shows_summary_json_figures(ui_factory) -> None:
    """One process, 16 users, a window that ends on its own (audit N5: after `harness ui
    scenarios/mixed.yaml` finished, the cards and table said 150 requests and TTFT p99 488.9 ms
    while the banner, summary.json and report said 152 and 327 ms)."""
    ui = ui_factory()
    live = ui.get("/llm/api/live")
    res = ui.post("/swarm", {"user_count": "16", "spawn_rate": "16", "host": live["host"], "measured_window": "4"})
    assert res.get("success"), res
    ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "finished", 60, "the run to finish on its own")
    live = ui.get("/llm/api/live")
    summary = json.loads((Path(live["run_dir"]) / "summary.json").read_text())
    _assert_cards_are_the_summary(live, summary)


def _assert_cards_are_the_summary(live: dict, summary: dict) -> None:
    per_class = {**summary["per_class"], "All classes": summary}
    for row in live["classes"]:
        block = per_class[row["name"]]
        assert (row["requests"], row["failed"]) == (block["requests"]["completed"], block["requests"]["failed"]), row[
            "name"
        ]
        for metric, key in (("ttft", "ttft"), ("itl_token", "itl"), ("tpot", "tpot"), ("e2e", "e2e")):
            for p in ("p50", "p90", "p99"):
                assert row[key][p] == pytest.approx(block["latency_ms"][metric][p], rel=1e-9), (row["name"], metric, p)


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
    _rows, run_rows = _llm_rows(ui)
    assert dict((r["item"], r["value"]) for r in run_rows)["State"] == "error"
    assert "Traceback" not in Path(ui.log.name).read_text()


def test_every_ui_test_starts_with_a_cold_prefix_cache(ui_factory) -> None:
    """Start a test, let it finish, start another: the second must not be served from the first's
    cached prompts (audit D2: the dashboard showed `Prefix hits 99.2 %`)."""
    ui = ui_factory()
    live = ui.get("/llm/api/live")
    summaries = []
    for _ in range(2):
        res = ui.post(
            "/swarm",
            {
                "user_count": "4",
                "spawn_rate": "4",
                "host": live["host"],
                "measured_window": "3",
                "scenario": live["scenario_path"],
            },
        )
        assert res.get("success"), res
        ui.wait_for(lambda: ui.get("/llm/api/live")["state"] in ("warmup", "measuring"), 30, "the test to start")
        ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "finished", 60, "the test to finish")
        summaries.append(json.loads((Path(ui.get("/llm/api/live")["run_dir"]) / "summary.json").read_text()))
    second = summaries[1]
    assert second["prefix_cache_isolation"]["mode"] == "reset"
    assert second["engine"]["prefix_cache"]["hit_rate"] < 0.1, second["engine"]["prefix_cache"]
    assert summaries[0]["scenario"]["fingerprint"] == second["scenario"]["fingerprint"]


def test_a_harness_worker_process_feeds_the_llm_tab_like_a_local_one(ui_factory, tmp_path: Path) -> None:
    """Issue 19 item 18 (LLM tab half): `harness ui --master` here, `harness worker` elsewhere. The
    worker is a separate `harness worker` process (the command another host runs), connected over
    Locust's messaging on loopback; its deltas feed the live view as a local worker's do."""
    port = free_port()
    ui = ui_factory("--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port))
    log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", "worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        ui.wait_for(
            lambda: '"worker_count": 1' in urllib.request.urlopen(ui.base + "/", timeout=10).read().decode(),
            60,
            "the worker to connect",
        )
        live = ui.get("/llm/api/live")
        res = ui.post("/swarm", {"user_count": "2", "spawn_rate": "2", "host": live["host"], "measured_window": "3"})
        assert res.get("success"), res
        ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "finished", 60, "the run to finish")
        live = ui.get("/llm/api/live")
        summary = json.loads((Path(live["run_dir"]) / "summary.json").read_text())
        assert summary["requests"]["completed"] > 0 and live["workers"] == 1
        assert live["classes"][-1]["requests"] == summary["requests"]["completed"]  # the LLM tab saw every one
        rows, _ = _llm_rows(ui)
        assert (
            rows[-1]["cls"] == "All classes"
            and int(rows[-1]["requests"].replace(",", "")) == summary["requests"]["completed"]
        )
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
        log.close()


def _scrape_total(url: str, family: str, suffix: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=5) as r:
        fams = {f.name: f for f in text_string_to_metric_families(r.read().decode())}
    if family not in fams:
        return 0.0
    return sum(
        s.value
        for s in fams[family].samples
        if s.name.endswith(suffix) and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_remote_workers_feed_the_masters_prometheus_exporter(ui_factory, tmp_path: Path) -> None:
    """Issue 19 item 18 (exporter half): `harness ui --master --metrics-port P` and two `harness
    worker` processes, each with its own PROMETHEUS_MULTIPROC_DIR (as on two other hosts: nothing
    shared with the master). The master's /metrics counts every worker's requests, live and at the
    end, equal to summary.json and the sum of the workers' results; the workers write no files."""
    port, mport = free_port(), free_port()
    ui = ui_factory(
        "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "--metrics-port", str(mport)
    )
    url = f"http://127.0.0.1:{mport}/metrics"
    workers, dirs = [], []
    try:
        for k in range(2):
            d = tmp_path / f"host{k}-prom"
            d.mkdir()
            dirs.append(d)
            env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(d), "HARNESS_METRICS_DIR": str(d)}
            log = open(tmp_path / f"worker{k}.log", "w")
            workers.append(
                (
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "harness.cli.main",
                            "worker",
                            "--master-host",
                            "127.0.0.1",
                            "--master-port",
                            str(port),
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=ROOT,
                        start_new_session=True,
                        env=env,
                    ),
                    log,
                )
            )
        ui.wait_for(
            lambda: '"worker_count": 2' in urllib.request.urlopen(ui.base + "/", timeout=10).read().decode(),
            60,
            "two workers to connect",
        )
        live = ui.get("/llm/api/live")
        res = ui.post("/swarm", {"user_count": "4", "spawn_rate": "4", "host": live["host"], "measured_window": "5"})
        assert res.get("success"), res
        seen_live: list[float] = []

        def counted_while_measuring() -> bool:
            state = ui.get("/llm/api/live")["state"]
            n = _scrape_total(url, "harness_requests", "_total", phase="measure")
            if state == "measuring" and n > 0:
                seen_live.append(n)
            return bool(seen_live) or state == "finished"

        ui.wait_for(counted_while_measuring, 60, "the exporter to count requests during the window")
        ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "finished", 60, "the run to finish")
        live = ui.get("/llm/api/live")
        run = Path(live["run_dir"])
        summary = json.loads((run / "summary.json").read_text())
        shares = [json.loads((run / f"load_result.w{k}.json").read_text()) for k in (0, 1)]
        counts = [w["metrics"]["_all"]["counts"]["completed"] for w in shares]
        assert seen_live, "the master's /metrics showed no request while the window was open"
        assert all(n > 0 for n in counts) and summary["requests"]["completed"] == sum(counts)
        done = _scrape_total(url, "harness_requests", "_total", phase="measure", outcome="ok", run=run.name)
        assert done == sum(counts) == summary["requests"]["completed"]
        assert _scrape_total(url, "harness_ttft_seconds", "_count") == summary["latency_ms"]["ttft"]["count"]
        assert _scrape_total(url, "harness_output_tokens", "_total") == summary["tokens"]["output_total"]
        assert live["classes"][-1]["requests"] == summary["requests"]["completed"]  # the LLM tab: every worker's
        assert [list(d.iterdir()) for d in dirs] == [[], []]  # the workers exported nothing themselves
    finally:
        for proc, log in workers:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            log.close()
