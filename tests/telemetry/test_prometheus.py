"""Prometheus server mode against a REAL Prometheus scraping the exporter: both modes must agree.

Prometheus is started by the fixture on 127.0.0.1 with a generated config (scrape every 500 ms),
a temp TSDB and a free port, and terminated after. Its readiness takes ~0.1 s but its first scrape
~5 s (target discovery is throttled), so one Prometheus serves the whole module.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
import requests
from waiting import lines_of, wait_until

from harness.scenario.models import Telemetry
from harness.telemetry import TelemetrySession

from .conftest import Exporter, FakeMetrics, Prometheus, free_port, needs_prometheus
from .helpers import assert_all_null, assert_close_tree, assert_shape, telemetry_warnings


def both_scraped(dirs, what: str, match, after: tuple[int, ...] = (0, 0), count: int = 1) -> tuple[int, ...]:
    """Wait until each session's engine_metrics.jsonl holds, past its first `after` lines, `count`
    scrapes that `match`; returns the line counts then (the next call's `after`)."""

    def found():
        counts = []
        for out, skip in zip(dirs, after, strict=True):
            lines = [json.loads(x) for x in lines_of(out / "engine_metrics.jsonl")]
            if sum(1 for x in lines[skip:] if match(x)) < count:
                return None
            counts.append(len(lines))
        return tuple(counts)

    return wait_until(found, what)


MIB = 1024 * 1024


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    exporter = Exporter("--engines", "2", "--kv-step-s", "1.0", "--dcgm")
    prom = None
    try:
        prom = Prometheus(tmp_path_factory.mktemp("prom"), [f"127.0.0.1:{exporter.port}"])
        print(f"\nprometheus: ready after {prom.ready_s:.3f} s, first scrape after {prom.first_scrape_s:.2f} s")
        yield exporter, prom
    finally:
        if prom is not None:
            prom.close()
        exporter.close()


@needs_prometheus
def test_colon_names_are_stored_with_underscores(stack) -> None:
    """The trap this module works around (prometheus_client 0.26 OpenMetrics + Prometheus 2.42)."""
    _exporter, prom = stack

    def q(expr: str) -> list:
        return requests.get(f"{prom.url}/api/v1/query", params={"query": expr}, timeout=2).json()["data"]["result"]

    assert q('{__name__="vllm_num_requests_running"}'), "expected escaped names in the TSDB"
    assert q('{__name__="vllm:num_requests_running"}') == [], "colon names are stored now: revisit the docstring"
    assert len(q('{__name__=~"vllm[:_]num_requests_running"}')) == 2


@needs_prometheus
def test_direct_and_prometheus_modes_agree(stack, tmp_path, caplog) -> None:
    exporter, prom = stack
    direct = TelemetrySession(
        target_url=exporter.url,
        config=Telemetry(interval_s=0.25, nvml=False),
        out_dir=tmp_path / "direct",
        expected_prefix_hit_rate=0.6,
    )
    viaprom = TelemetrySession(
        target_url=exporter.url,
        config=Telemetry(interval_s=0.5, nvml=False, prometheus=prom.url, selector='{job="engine"}'),
        out_dir=tmp_path / "prom",
        expected_prefix_hit_rate=0.6,
    )
    dirs = (tmp_path / "direct", tmp_path / "prom")
    direct.start()
    viaprom.start()
    n = both_scraped(dirs, "a scrape before the window", lambda x: x.get("ok"))
    direct.mark_window_start()
    viaprom.mark_window_start()
    n = both_scraped(dirs, "the baseline scrapes", lambda x: x.get("mark") == "start", n)
    # each phase lasts until both sources saw its state, then two more of their scrapes, so the sampled
    # means (KV usage, running) weigh the phases alike in both modes
    active, idle = (lambda x: (x.get("kv_usage") or 0) >= 0.3), (lambda x: x.get("kv_usage") == pytest.approx(0.05))
    exporter.cmd("active")
    n = both_scraped(dirs, "a scrape at the top KV level", lambda x: x.get("kv_usage") == pytest.approx(0.9), n)
    n = both_scraped(dirs, "two more active scrapes", active, n, count=2)
    exporter.cmd("idle")
    n = both_scraped(dirs, "the pre-restart idle values, three times", idle, n, count=3)
    exporter.cmd("reset")
    exporter.cmd("active")
    # after the restart KV cycles up to 0.9 again: a scrape at 0.9 shows each source saw it active
    n = both_scraped(dirs, "an active scrape after the restart", lambda x: x.get("kv_usage") == pytest.approx(0.9), n)
    both_scraped(dirs, "two more active scrapes", active, n, count=2)
    truth = exporter.cmd("idle")
    direct.mark_window_end()
    viaprom.mark_window_end()
    live = viaprom.live()
    d, p = direct.stop(), viaprom.stop()

    for b in (d, p):
        assert_shape(b)
        assert b["telemetry"]["missing_reason"] is None
        assert b["preemptions"]["count"] == truth["preemptions"]
        assert b["prompt_tokens"] == truth["prompt_tokens"]
        assert b["generation_tokens"] == truth["generation_tokens"]
        assert b["prefix_cache"]["hits"] == truth["prefix_hits"]
        assert b["prefix_cache"]["queries"] == truth["prefix_queries"]
        assert b["spec_decode"]["drafts"] == truth["drafts"]
        assert b["engine_latency_ms"]["ttft"]["count"] == truth["requests"]
        assert b["kv_usage"]["max"] == pytest.approx(0.9)
        assert b["kv_capacity_tokens"] == 32000
    assert telemetry_warnings(caplog) == []
    assert d["telemetry"]["source"] == "direct" and p["telemetry"]["source"] == "prometheus"
    for key in ("ttft", "itl", "e2e", "queue"):
        assert_close_tree(p["engine_latency_ms"][key], d["engine_latency_ms"][key], path=key)
    assert p["prefix_cache"] == d["prefix_cache"]
    assert_close_tree(p["spec_decode"], d["spec_decode"], path="spec_decode")
    # sampled quantities: different sampling instants, small tolerance
    assert p["kv_usage"]["mean"] == pytest.approx(d["kv_usage"]["mean"], abs=0.08)
    assert p["running"]["mean"] == pytest.approx(d["running"]["mean"], abs=1.6)
    assert p["running"]["max"] == d["running"]["max"] == 18.0
    assert p["preemptions"]["per_s"] == pytest.approx(d["preemptions"]["per_s"], rel=0.15)
    assert p["telemetry"]["scrapes"] >= 4 and d["telemetry"]["scrapes"] >= 4
    # GPU memory: DCGM series through Prometheus; nothing in direct mode on a GPU-less machine
    gm = p["gpu_memory"]
    assert gm["available"] and gm["source"] == "dcgm"
    assert gm["used_max_bytes"] == (70000 + 60000) * MIB and gm["total_bytes"] == 2 * 80000 * MIB
    assert [g["used_max_bytes"] for g in gm["per_gpu"]] == [70000 * MIB, 60000 * MIB]
    assert d["gpu_memory"]["available"] is False
    assert live["ok"] and live["source"] == "prometheus" and live["profile"] == "vllm"


@needs_prometheus
def test_selector_matching_nothing(stack, tmp_path, caplog) -> None:
    _exporter, prom = stack
    s = TelemetrySession(
        target_url=None,
        config=Telemetry(interval_s=0.2, nvml=False, prometheus=prom.url, selector='job="not-there"'),
        out_dir=tmp_path,
    )
    s.start()
    s.mark_window_start()
    wait_until(lambda: telemetry_warnings(caplog), "the warning that the selector matches nothing")
    s.mark_window_end()
    block = s.stop()
    assert_shape(block)
    assert_all_null(block)
    reason = block["telemetry"]["missing_reason"]
    assert "no vLLM/SGLang/TGI/llama.cpp metrics" in reason and 'job="not-there"' in reason
    assert len(telemetry_warnings(caplog)) == 1


def test_prometheus_unreachable(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="harness.telemetry")
    s = TelemetrySession(
        target_url=None,
        config=Telemetry(interval_s=0.2, nvml=False, prometheus=f"http://127.0.0.1:{free_port()}"),
        out_dir=tmp_path,
    )
    s.start()
    s.mark_window_start()
    wait_until(lambda: telemetry_warnings(caplog), "the warning that Prometheus is unreachable")
    s.mark_window_end()
    block = s.stop()
    assert_shape(block)
    assert block["telemetry"]["source"] == "prometheus" and "unreachable" in block["telemetry"]["missing_reason"]
    assert len(telemetry_warnings(caplog)) == 1


def test_not_a_prometheus(fake_metrics: FakeMetrics, tmp_path, caplog) -> None:
    fake_metrics.set("<html>grafana login</html>", content_type="text/html")
    s = TelemetrySession(
        target_url=None, config=Telemetry(interval_s=0.2, nvml=False, prometheus=fake_metrics.url), out_dir=tmp_path
    )
    s.start()
    s.mark_window_start()
    wait_until(lambda: telemetry_warnings(caplog), "the warning that it is not a Prometheus")
    time.sleep(3 * 0.2)  # not a wait for anything: three intervals in which a retry would show
    s.mark_window_end()
    block = s.stop()
    assert "not a Prometheus API" in block["telemetry"]["missing_reason"]
    assert fake_metrics.hits == 1 and len(telemetry_warnings(caplog)) == 1


def test_bad_selector_is_reported(tmp_path) -> None:
    s = TelemetrySession(
        target_url=None, config=Telemetry(prometheus="http://127.0.0.1:9", selector="job=vllm"), out_dir=tmp_path
    )
    block = s.stop()
    assert "not a PromQL label matcher list" in block["telemetry"]["missing_reason"]
