"""The web UI plugin over HTTP with the load spread over processes: `harness ui --processes 2`
(local workers), and `harness ui --master` with `harness worker` processes (as on other hosts)
feeding the LLM tab and the master's Prometheus exporter. Helpers: tests/ui/webui.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from webui import ROOT, assert_cards_are_the_summary, llm_rows, started_uis

from harness.run.target import free_port


@pytest.fixture
def ui_factory(tmp_path: Path):
    yield from started_uis(tmp_path)


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
    assert_cards_are_the_summary(live, summary)  # a run that ended by itself (audit N5)
    ui.wait_for(lambda: ui.get("/llm/api/live")["locust_state"] == "stopped", 20, "Locust to show the test stopped")


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
        rows, _ = llm_rows(ui)
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
