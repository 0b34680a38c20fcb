"""Bad /metrics endpoints: one warning, a clear missing_reason, no retry storm, a block anyway."""

from __future__ import annotations

import json
import logging
import time

import pytest

from harness.scenario.models import Telemetry
from harness.telemetry import TelemetrySession

from .conftest import FakeMetrics, free_port
from .helpers import assert_all_null, assert_shape, telemetry_warnings
from .pages import VLLM_A, VLLM_B

INTERVAL = 0.2


def run_window(url: str, tmp_path, seconds: float = 0.7, **kw) -> tuple[dict, float]:
    s = TelemetrySession(target_url=url, config=Telemetry(interval_s=INTERVAL, nvml=False, **kw), out_dir=tmp_path)
    s.start()
    s.mark_window_start()
    time.sleep(seconds)
    s.mark_window_end()
    t = time.perf_counter()
    block = s.stop()
    return block, time.perf_counter() - t


def started_window(url: str, tmp_path, **kw) -> TelemetrySession:
    """A session whose measured window has begun (the baseline scrape is under way)."""
    kw.setdefault("interval_s", INTERVAL)
    s = TelemetrySession(target_url=url, config=Telemetry(nvml=False, **kw), out_dir=tmp_path)
    s.start()
    s.mark_window_start()
    return s


@pytest.mark.parametrize(
    "status, ctype, body, fragment, max_hits",
    [
        (404, "text/plain", "Not Found", "404", 1),
        (200, "text/html; charset=utf-8", "<html><body>login</body></html>", "HTML", 1),
        (200, "application/json", '{"metrics": []}', "JSON", 1),
        (200, "text/plain; version=0.0.4", "\x00\x01garbage{{{ not metrics\n", "not Prometheus exposition", 1),
        (500, "text/plain", "boom", "HTTP 500", 3),
        (200, "text/plain", "", "empty metrics page", 3),
        (200, "text/plain", "python_gc_objects_collected_total 5\nprocess_cpu_seconds_total 1\n", "no vLLM/SGLang", 3),
    ],
    ids=["absent-404", "html", "json", "garbage", "http-500", "empty", "not-an-engine"],
)
def test_bad_endpoint_degrades_cleanly(fake_metrics: FakeMetrics, tmp_path, caplog, status, ctype, body, fragment, max_hits) -> None:
    caplog.set_level(logging.INFO, logger="harness.telemetry")
    fake_metrics.set(body, status=status, content_type=ctype)
    block, stop_s = run_window(fake_metrics.url, tmp_path)
    assert_shape(block)
    assert_all_null(block)
    tel = block["telemetry"]
    assert tel["source"] == "direct" and fragment in tel["missing_reason"]
    assert len(telemetry_warnings(caplog)) == 1, telemetry_warnings(caplog)
    assert fake_metrics.hits <= max_hits  # disabled after a permanent error / 3 in a row: no storm
    assert stop_s < 1.0
    lines = (tmp_path / "engine_metrics.jsonl").read_text().splitlines()
    assert lines and '"ok": false' in lines[0]


def test_slow_endpoint_times_out_and_is_disabled(fake_metrics: FakeMetrics, tmp_path, caplog) -> None:
    fake_metrics.set(VLLM_A, delay_s=3.0)
    block, stop_s = run_window(fake_metrics.url, tmp_path, seconds=3.4, timeout_s=1.0)
    assert_shape(block)
    assert "timed out" in block["telemetry"]["missing_reason"]
    assert len(telemetry_warnings(caplog)) == 1
    assert fake_metrics.hits <= 3
    assert stop_s < 2.5


def test_refused_connection(tmp_path, caplog) -> None:
    block, stop_s = run_window(f"http://127.0.0.1:{free_port()}", tmp_path, seconds=0.8)
    assert_shape(block)
    assert "unreachable" in block["telemetry"]["missing_reason"]
    assert len(telemetry_warnings(caplog)) == 1
    assert stop_s < 1.0


def test_failures_before_the_window_are_tolerated_quietly(fake_metrics: FakeMetrics, tmp_path, caplog) -> None:
    """The engine may still be starting when telemetry starts: no warning, no disable."""
    fake_metrics.set("starting", status=503)
    s = TelemetrySession(target_url=fake_metrics.url, config=Telemetry(interval_s=INTERVAL, nvml=False), out_dir=tmp_path)
    s.start()
    time.sleep(1.0)  # ~5 failed scrapes
    fake_metrics.set(VLLM_A)
    time.sleep(0.3)
    s.mark_window_start()
    time.sleep(0.5)
    fake_metrics.set(VLLM_B)
    time.sleep(0.3)
    s.mark_window_end()
    block = s.stop()
    assert telemetry_warnings(caplog) == []
    assert block["telemetry"]["missing_reason"] is None
    assert block["preemptions"]["count"] == 4 and block["telemetry"]["failures"] >= 4


def test_one_transient_failure_in_the_window_recovers(fake_metrics: FakeMetrics, tmp_path, caplog) -> None:
    fake_metrics.set(VLLM_A)
    s = started_window(fake_metrics.url, tmp_path)
    time.sleep(0.3)
    fake_metrics.set("overloaded", status=503)
    time.sleep(0.3)
    fake_metrics.set(VLLM_B)
    time.sleep(0.5)
    s.mark_window_end()
    block = s.stop()
    assert len(telemetry_warnings(caplog)) == 1
    assert block["telemetry"]["missing_reason"] is None
    assert block["prefix_cache"]["hits"] == 3000 and block["telemetry"]["failures"] >= 1


def test_explicit_profile_on_a_page_without_its_metrics(fake_metrics: FakeMetrics, tmp_path) -> None:
    fake_metrics.set("foo_bar 1\nbaz_qux 2\n")
    block, _ = run_window(fake_metrics.url, tmp_path, profile="sglang")
    assert "no sglang metrics" in block["telemetry"]["missing_reason"]


def test_final_scrape_recovers_counters_after_transient_failures(fake_metrics: FakeMetrics, tmp_path, caplog) -> None:
    """Periodic scrapes stop after 3 failures in a row, yet the final scrape is still taken: the
    counter deltas (preemptions, prefix hits) span the whole window; gauges are marked partial."""
    fake_metrics.set(VLLM_A)
    s = started_window(fake_metrics.url, tmp_path)
    time.sleep(0.3)
    fake_metrics.set("overloaded", status=503)
    time.sleep(1.2)  # >= 3 failed scrapes: periodic scraping is off
    hits_while_off = fake_metrics.hits
    time.sleep(0.6)
    assert fake_metrics.hits == hits_while_off  # off means off until the final scrape
    fake_metrics.set(VLLM_B)
    s.mark_window_end()
    block = s.stop()
    tel = block["telemetry"]
    assert block["preemptions"]["count"] == 4 and block["prefix_cache"]["hits"] == 3000
    assert "counters span the whole window" in tel["missing_reason"] and "HTTP 503" in tel["missing_reason"]
    assert tel["window_s"] is not None and len(telemetry_warnings(caplog)) == 1


def test_final_scrape_is_retried_once(fake_metrics: FakeMetrics, tmp_path) -> None:
    """A failing final scrape is retried once before the window ends at the last good scrape."""
    fake_metrics.set(VLLM_A)
    s = started_window(fake_metrics.url, tmp_path, interval_s=5.0)
    time.sleep(0.3)
    fake_metrics.set("overloaded", status=503)
    hits = fake_metrics.hits
    s.mark_window_end()
    block = s.stop()
    assert fake_metrics.hits == hits + 2
    assert block["preemptions"]["count"] is None  # one scrape only: nothing to subtract
    assert "fewer than 2" in block["telemetry"]["missing_reason"] or "503" in block["telemetry"]["missing_reason"]


def test_both_marks_during_one_slow_scrape_get_a_scrape_each(fake_metrics: FakeMetrics, tmp_path) -> None:
    """A window shorter than one scrape (a busy engine serving /metrics slowly): the start and end
    marks arrive together, yet the baseline and the final scrape are two scrapes, so counters are
    window deltas instead of nothing."""
    fake_metrics.set(VLLM_A, delay_s=0.5)
    s = TelemetrySession(target_url=fake_metrics.url, config=Telemetry(interval_s=INTERVAL, nvml=False), out_dir=tmp_path)
    s.start()
    time.sleep(0.1)  # a scrape is in flight
    s.mark_window_start()
    time.sleep(0.05)
    s.mark_window_end()
    fake_metrics.set(VLLM_B, delay_s=0.5)  # every scrape from here on (the in-flight one too) answers B
    block = s.stop()
    tel = block["telemetry"]
    assert tel["scrapes"] == 2 and tel["missing_reason"] is None
    assert block["preemptions"]["count"] == 0  # B - B: both scrapes after the marks
    lines = [json.loads(x) for x in (tmp_path / "engine_metrics.jsonl").read_text().splitlines()]
    assert [x.get("mark") for x in lines if x.get("mark")] == ["start", "end"]


def test_hung_endpoint_final_scrape_not_retried(fake_metrics: FakeMetrics, tmp_path) -> None:
    """A final scrape that timed out is not retried (a hung engine will not answer a second time):
    stop() waits for the final scrape alone, not for a periodic one in flight."""
    fake_metrics.set(VLLM_A)
    s = started_window(fake_metrics.url, tmp_path, interval_s=5.0, timeout_s=0.5)
    time.sleep(0.3)
    fake_metrics.set(VLLM_B, delay_s=2.0)
    hits = fake_metrics.hits
    s.mark_window_end()
    block = s.stop()
    assert fake_metrics.hits == hits + 1
    assert "timed out" in (block["telemetry"]["missing_reason"] or "")
