"""Bad /metrics endpoints: one warning, a clear missing_reason, no retry storm, a block anyway."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from waiting import HANG_S, lines_of, wait_for_lines, wait_until

from harness.scenario.models import Telemetry
from harness.telemetry import TelemetrySession

from .conftest import FakeMetrics, free_port
from .helpers import assert_all_null, assert_shape, telemetry_warnings
from .pages import VLLM_A, VLLM_B

INTERVAL = 0.2


def run_window(url: str, tmp_path, attempts: int, hits=lambda: 0, **kw) -> tuple[dict, int]:
    """A window in which the session makes `attempts` failing scrapes (baseline, then periodic),
    then three more intervals in which a retry storm would show; returns the block and the scrapes
    stop() itself made (`hits()` before and after: a disabled session makes none)."""
    s = TelemetrySession(target_url=url, config=Telemetry(interval_s=INTERVAL, nvml=False, **kw), out_dir=tmp_path)
    # the mark starts the session: the baseline is its first scrape, so the count of attempts does not
    # depend on whether a periodic scrape raced the mark on a busy host (start() then the mark: 2 hits)
    s.mark_window_start()
    wait_for_lines(tmp_path / "engine_metrics.jsonl", attempts, f"{attempts} failed scrape(s) logged")
    time.sleep(3 * INTERVAL)  # not a wait for anything: the time in which a storm would show
    s.mark_window_end()
    before = hits()
    block = s.stop()
    return block, hits() - before


def started_window(url: str, tmp_path, **kw) -> TelemetrySession:
    """A session whose measured window has begun and whose baseline scrape has been logged."""
    kw.setdefault("interval_s", INTERVAL)
    s = TelemetrySession(target_url=url, config=Telemetry(nvml=False, **kw), out_dir=tmp_path)
    s.start()
    s.mark_window_start()
    wait_until(
        lambda: any('"mark": "start"' in x for x in lines_of(tmp_path / "engine_metrics.jsonl")), "the baseline scrape"
    )
    return s


def failed_scrapes(tmp_path) -> int:
    return sum('"ok": false' in x for x in lines_of(tmp_path / "engine_metrics.jsonl"))


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
def test_bad_endpoint_degrades_cleanly(
    fake_metrics: FakeMetrics, tmp_path, caplog, status, ctype, body, fragment, max_hits
) -> None:
    caplog.set_level(logging.INFO, logger="harness.telemetry")
    fake_metrics.set(body, status=status, content_type=ctype)
    block, stop_hits = run_window(fake_metrics.url, tmp_path, max_hits, lambda: fake_metrics.hits)
    assert_shape(block)
    assert_all_null(block)
    tel = block["telemetry"]
    assert tel["source"] == "direct" and fragment in tel["missing_reason"]
    assert len(telemetry_warnings(caplog)) == 1, telemetry_warnings(caplog)
    assert fake_metrics.hits <= max_hits  # disabled after a permanent error / 3 in a row: no storm
    assert stop_hits == 0  # off means off: stop() does not try a final scrape either
    lines = (tmp_path / "engine_metrics.jsonl").read_text().splitlines()
    assert lines and '"ok": false' in lines[0]


def test_slow_endpoint_times_out_and_is_disabled(fake_metrics: FakeMetrics, tmp_path, caplog) -> None:
    fake_metrics.set(VLLM_A, delay_s=3.0)
    block, stop_hits = run_window(fake_metrics.url, tmp_path, 3, lambda: fake_metrics.hits, timeout_s=1.0)
    assert_shape(block)
    assert "timed out" in block["telemetry"]["missing_reason"]
    assert len(telemetry_warnings(caplog)) == 1
    assert fake_metrics.hits <= 3
    assert stop_hits == 0  # three timeouts in a row: off, and stop() does not wait for a fourth


def test_refused_connection(tmp_path, caplog) -> None:
    block, _ = run_window(f"http://127.0.0.1:{free_port()}", tmp_path, 3)
    assert_shape(block)
    assert "unreachable" in block["telemetry"]["missing_reason"]
    assert len(telemetry_warnings(caplog)) == 1


def test_failures_before_the_window_are_tolerated_quietly(fake_metrics: FakeMetrics, tmp_path, caplog) -> None:
    """The engine may still be starting when telemetry starts: no warning, no disable."""
    fake_metrics.set("starting", status=503)
    s = TelemetrySession(
        target_url=fake_metrics.url, config=Telemetry(interval_s=INTERVAL, nvml=False), out_dir=tmp_path
    )
    s.start()
    wait_until(lambda: fake_metrics.hits >= 5, "5 failed scrapes before the window")
    fake_metrics.set(VLLM_A)
    jsonl = tmp_path / "engine_metrics.jsonl"
    wait_until(lambda: '"ok": true' in "".join(lines_of(jsonl)), "a good scrape before the window")
    s.mark_window_start()
    wait_until(lambda: any('"mark": "start"' in x for x in lines_of(jsonl)), "the baseline scrape")
    fake_metrics.set(VLLM_B)
    seen = fake_metrics.hits
    wait_until(lambda: fake_metrics.hits > seen and len(lines_of(jsonl)) >= 3, "a scrape of page B")
    s.mark_window_end()
    block = s.stop()
    assert telemetry_warnings(caplog) == []
    assert block["telemetry"]["missing_reason"] is None
    assert block["preemptions"]["count"] == 4 and block["telemetry"]["failures"] >= 4


def test_one_transient_failure_in_the_window_recovers(fake_metrics: FakeMetrics, tmp_path, caplog) -> None:
    fake_metrics.set(VLLM_A)
    s = started_window(fake_metrics.url, tmp_path)
    fake_metrics.set("overloaded", status=503)
    wait_until(lambda: failed_scrapes(tmp_path) >= 1, "a failed scrape in the window")
    fake_metrics.set(VLLM_B)
    good = len(lines_of(tmp_path / "engine_metrics.jsonl"))
    wait_until(
        lambda: '"ok": true' in "".join(lines_of(tmp_path / "engine_metrics.jsonl")[good:]), "a good scrape after it"
    )
    s.mark_window_end()
    block = s.stop()
    assert len(telemetry_warnings(caplog)) == 1
    assert block["telemetry"]["missing_reason"] is None
    assert block["prefix_cache"]["hits"] == 3000 and block["telemetry"]["failures"] >= 1


def test_explicit_profile_on_a_page_without_its_metrics(fake_metrics: FakeMetrics, tmp_path) -> None:
    fake_metrics.set("foo_bar 1\nbaz_qux 2\n")
    block, _ = run_window(fake_metrics.url, tmp_path, 1, profile="sglang")
    assert "no sglang metrics" in block["telemetry"]["missing_reason"]


def test_final_scrape_recovers_counters_after_transient_failures(fake_metrics: FakeMetrics, tmp_path, caplog) -> None:
    """Periodic scrapes stop after 3 failures in a row, yet the final scrape is still taken: the
    counter deltas (preemptions, prefix hits) span the whole window; gauges are marked partial."""
    fake_metrics.set(VLLM_A)
    s = started_window(fake_metrics.url, tmp_path)
    fake_metrics.set("overloaded", status=503)
    wait_until(lambda: failed_scrapes(tmp_path) >= 3, "3 failed scrapes: periodic scraping is off")
    hits_while_off = fake_metrics.hits
    time.sleep(3 * INTERVAL)  # not a wait for anything: three intervals in which a scrape would show
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
    # no periodic scrape can fall between the marks, however slow the host (an extra hit at 5 s)
    s = started_window(fake_metrics.url, tmp_path, interval_s=600.0)
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
    fake_metrics.set(VLLM_A)
    fake_metrics.hold()  # every scrape waits for release(): a /metrics slower than the whole window
    s = TelemetrySession(
        target_url=fake_metrics.url, config=Telemetry(interval_s=INTERVAL, nvml=False), out_dir=tmp_path
    )
    s.start()
    wait_until(lambda: len(fake_metrics.held) >= 1, "a periodic scrape in flight")
    s.mark_window_start()
    wait_until(lambda: len(fake_metrics.held) >= 2, "the baseline scrape in flight beside it")
    s.mark_window_end()
    wait_until(lambda: len(fake_metrics.held) >= 3, "the final scrape in flight beside both")
    fake_metrics.set(VLLM_B)  # every scrape in flight answers B
    fake_metrics.release()
    block = s.stop()
    tel = block["telemetry"]
    assert tel["scrapes"] == 2 and tel["missing_reason"] is None
    assert block["preemptions"]["count"] == 0  # B - B: both scrapes after the marks
    lines = [json.loads(x) for x in (tmp_path / "engine_metrics.jsonl").read_text().splitlines()]
    assert [x.get("mark") for x in lines if x.get("mark")] == ["start", "end"]


def test_the_marks_do_not_queue_behind_a_periodic_scrape(fake_metrics: FakeMetrics, tmp_path) -> None:
    """Issue #19: /metrics answering slowly, a periodic scrape in flight at each mark. Each mark's
    scrape goes out at once on its own connection instead of queuing behind it, and stop() returns
    when the final scrape has answered, with the periodic one still unanswered (its late answer is
    dropped): the counters are exact deltas between the baseline and the final scrape."""
    fake_metrics.set(VLLM_A)
    fake_metrics.hold()
    s = TelemetrySession(
        target_url=fake_metrics.url, config=Telemetry(interval_s=INTERVAL, nvml=False), out_dir=tmp_path
    )
    s.start()
    wait_until(lambda: len(fake_metrics.held) >= 1, "the first periodic scrape in flight")
    s.mark_window_start()
    wait_until(lambda: len(fake_metrics.held) >= 2, "the baseline sent beside the periodic scrape in flight")
    fake_metrics.release(1)  # the baseline answers; the periodic scrape is still in flight
    jsonl = tmp_path / "engine_metrics.jsonl"
    wait_until(lambda: any('"mark": "start"' in x for x in lines_of(jsonl)), "the baseline logged")
    fake_metrics.set(VLLM_B)
    s.mark_window_end()
    wait_until(lambda: len(fake_metrics.held) >= 3, "the final scrape sent beside the periodic scrape in flight")
    fake_metrics.release(2)
    stopped: list[dict] = []
    stopper = threading.Thread(target=lambda: stopped.append(s.stop()), daemon=True)
    stopper.start()
    stopper.join(timeout=HANG_S)
    assert stopped, "stop() waited for the periodic scrape in flight"
    fake_metrics.release()  # the periodic scrape answers now, after the final one: dropped
    block = stopped[0]
    tel = block["telemetry"]
    assert tel["missing_reason"] is None and tel["scrapes"] == 2
    assert block["preemptions"]["count"] == 4 and block["prefix_cache"]["hits"] == 3000  # B - A
    lines = [json.loads(x) for x in lines_of(jsonl)]
    assert [x["mark"] for x in lines if x.get("mark")] == ["start", "end"]
    assert len(lines) == 2, lines  # the periodic scrape in flight since the start: never logged


def test_hung_endpoint_final_scrape_not_retried(fake_metrics: FakeMetrics, tmp_path) -> None:
    """A final scrape that timed out is not retried (a hung engine will not answer a second time):
    stop() waits for the final scrape alone, not for a periodic one in flight."""
    fake_metrics.set(VLLM_A)
    s = started_window(fake_metrics.url, tmp_path, interval_s=5.0, timeout_s=0.5)
    fake_metrics.set(VLLM_B, delay_s=2.0)
    hits = fake_metrics.hits
    s.mark_window_end()
    block = s.stop()
    assert fake_metrics.hits == hits + 1
    assert "timed out" in (block["telemetry"]["missing_reason"] or "")


def test_a_page_over_the_size_limit_turns_telemetry_off_after_one_fetch(
    fake_metrics: FakeMetrics, tmp_path, caplog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Audit R12: a valid 30 MB page (550k series), under the old 32 MiB cap, made a 3-s run take
    53 s and 1.8 GB, fetched and parsed at every mark. The cap is 8 MiB (HARNESS_MAX_METRICS_BYTES):
    such a page is one warning and telemetry off after one fetch."""
    caplog.set_level(logging.INFO, logger="harness.telemetry")
    monkeypatch.setenv("HARNESS_MAX_METRICS_BYTES", "100000")
    fake_metrics.set(VLLM_A + "".join(f'extra_series_total{{i="{i}"}} {i}\n' for i in range(5000)))
    block, stop_hits = run_window(fake_metrics.url, tmp_path, 1, lambda: fake_metrics.hits)
    assert_all_null(block)
    reason = block["telemetry"]["missing_reason"]
    assert "page larger than 100,000 bytes (set HARNESS_MAX_METRICS_BYTES=N to raise it)" in reason, reason
    assert fake_metrics.hits == 1 and stop_hits == 0
