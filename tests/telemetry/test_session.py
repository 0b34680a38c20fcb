"""TelemetrySession, direct mode, against the exporter process; configuration corner cases."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from waiting import lines_of, wait_until

from harness.errors import UserError
from harness.scenario.models import Telemetry
from harness.telemetry import TelemetrySession

from .conftest import Exporter, FakeMetrics
from .helpers import assert_all_null, assert_shape, telemetry_warnings
from .pages import SGLANG_A, SGLANG_B


def scraped(out: Path, what: str, match: Callable[[dict[str, Any]], Any], after: int = 0) -> int:
    """Wait until engine_metrics.jsonl holds, past its first `after` lines, a scrape that `match`es;
    returns how many lines it holds then (the next call's `after`)."""

    def found() -> int | None:
        lines = [json.loads(x) for x in lines_of(out / "engine_metrics.jsonl")]
        return len(lines) if any(match(x) for x in lines[after:]) else None

    return wait_until(found, what)


@pytest.fixture
def exporter():
    e = Exporter("--engines", "2")
    yield e
    e.close()


def test_direct_mode_equals_ground_truth_across_a_restart(exporter: Exporter, tmp_path, caplog) -> None:
    s = TelemetrySession(
        target_url=exporter.url,
        config=Telemetry(interval_s=0.2),
        out_dir=tmp_path,
        expected_prefix_hit_rate=0.6,
        engine_kind="vllm",
    )
    s.start()
    n = scraped(tmp_path, "a scrape before the window", lambda x: x.get("ok"))
    s.mark_window_start()
    n = scraped(tmp_path, "the baseline scrape", lambda x: x.get("mark") == "start", n)
    exporter.cmd("active")
    n = scraped(tmp_path, "a scrape at the top KV level", lambda x: x.get("kv_usage") == pytest.approx(0.9), n)
    exporter.cmd("idle")
    n = scraped(tmp_path, "an idle scrape before the restart", lambda x: x.get("kv_usage") == pytest.approx(0.05), n)
    exporter.cmd("reset")
    exporter.cmd("active")
    scraped(tmp_path, "an active scrape after the restart", lambda x: (x.get("kv_usage") or 0) > 0.05, n)
    truth = exporter.cmd("idle")
    live = s.live()
    s.mark_window_end()
    block = s.stop()

    assert_shape(block)
    assert telemetry_warnings(caplog) == []
    assert block["profile"] == "vllm"
    assert block["preemptions"]["count"] == truth["preemptions"] > 0
    assert block["prompt_tokens"] == truth["prompt_tokens"]
    assert block["generation_tokens"] == truth["generation_tokens"]
    assert block["prefix_cache"] == {
        "queries": truth["prefix_queries"],
        "hits": truth["prefix_hits"],
        "hit_rate": pytest.approx(0.6),
        "expected_hit_rate": 0.6,
    }
    assert block["engine_latency_ms"]["ttft"]["count"] == truth["requests"]
    assert block["engine_latency_ms"]["ttft"]["mean"] == pytest.approx(150.0)
    assert block["engine_latency_ms"]["e2e"]["p50_bucket_ms"] == [1000.0, 1500.0]
    assert block["engine_latency_ms"]["itl"]["count"] == 20 * truth["requests"]
    assert block["spec_decode"]["acceptance_rate"] == pytest.approx(truth["accepted"] / truth["draft_tokens"])
    assert block["spec_decode"]["per_position"] == pytest.approx([3 / 4, 2 / 4, 2 / 4])
    assert block["kv_usage"]["max"] == pytest.approx(0.9)
    assert 0.05 < block["kv_usage"]["mean"] < 0.9
    assert block["kv_capacity_tokens"] == 2 * 16000 and block["block_size"] == 16
    assert block["running"]["max"] == 18.0  # 2 engines x round(0.9 * 10)
    assert block["telemetry"]["counter_resets"] >= 1
    assert block["telemetry"]["scrapes"] >= 5 and block["telemetry"]["missing_reason"] is None

    assert live["ok"] and live["profile"] == "vllm" and "kv_usage" in live and live["preemptions_total"] is not None
    lines = [json.loads(x) for x in (tmp_path / "engine_metrics.jsonl").read_text().splitlines()]
    assert len(lines) >= block["telemetry"]["scrapes"]
    assert [x["mark"] for x in lines if "mark" in x] == ["start", "end"]
    assert {x["phase"] for x in lines} == {"pre", "window", "post"}
    window = [x for x in lines if x["phase"] == "window" or x.get("mark") == "end"]
    assert max(x["kv_usage"] for x in window) == pytest.approx(0.9)


def test_stop_without_marks_and_twice(exporter: Exporter, tmp_path) -> None:
    s = TelemetrySession(target_url=exporter.url, config=Telemetry(interval_s=0.2, nvml=False), out_dir=tmp_path)
    s.start()
    scraped(tmp_path, "a scrape", lambda x: x.get("ok"))
    block = s.stop()
    assert_shape(block)
    assert block["telemetry"]["missing_reason"] == "mark_window_start was never called"
    assert s.stop() is block


def test_stop_without_end_mark_closes_the_window(exporter: Exporter, tmp_path) -> None:
    s = TelemetrySession(target_url=exporter.url, config=Telemetry(interval_s=0.2, nvml=False), out_dir=tmp_path)
    s.start()
    s.mark_window_start()
    n = scraped(tmp_path, "the baseline scrape", lambda x: x.get("mark") == "start")
    scraped(tmp_path, "a periodic scrape in the window", lambda x: x.get("ok") and x["phase"] == "window", n)
    block = s.stop()
    assert block["telemetry"]["missing_reason"] is None and block["telemetry"]["scrapes"] >= 2
    assert block["preemptions"]["count"] == 0


def test_explicit_profile_and_sglang_page(fake_metrics: FakeMetrics, tmp_path) -> None:
    fake_metrics.set(SGLANG_A)
    s = TelemetrySession(
        target_url=None,
        config=Telemetry(interval_s=0.2, nvml=False, profile="sglang", metrics_url=fake_metrics.url + "/metrics"),
        out_dir=tmp_path,
    )
    s.start()
    s.mark_window_start()
    n = scraped(tmp_path, "the baseline scrape", lambda x: x.get("mark") == "start")
    fake_metrics.set(SGLANG_B)
    seen = fake_metrics.hits
    wait_until(lambda: fake_metrics.hits > seen, "a scrape of page B")
    scraped(tmp_path, "the scrape of page B logged", lambda x: x.get("ok"), n)
    s.mark_window_end()
    block = s.stop()
    assert block["profile"] == "sglang" and block["preemptions"]["count"] == 7


def test_unknown_profile_is_a_user_error(tmp_path) -> None:
    with pytest.raises(UserError, match="unknown engine profile 'vllmm'; choose one of"):
        TelemetrySession(target_url="http://x", config=Telemetry(profile="vllmm"), out_dir=tmp_path)


@pytest.mark.parametrize(
    "kw, target, kind, reason",
    [
        ({"enabled": False}, "http://127.0.0.1:1", None, "telemetry disabled"),
        ({}, "http://127.0.0.1:1", "transformers", "transformers engine exposes no Prometheus /metrics"),
        ({}, None, None, "no target URL"),
    ],
)
def test_sources_that_are_none(tmp_path, caplog, kw, target, kind, reason) -> None:
    s = TelemetrySession(
        target_url=target, config=Telemetry(interval_s=0.2, nvml=False, **kw), out_dir=tmp_path, engine_kind=kind
    )
    s.start()
    s.mark_window_start()
    s.mark_window_end()
    block = s.stop()
    assert_shape(block)
    assert_all_null(block)
    assert block["telemetry"]["source"] == "none" and reason in block["telemetry"]["missing_reason"]
    assert len(telemetry_warnings(caplog)) == (0 if kw.get("enabled") is False else 1)
    caplog.set_level(logging.WARNING)


@pytest.mark.parametrize("idle_before", [True, False])
def test_without_warmup_the_counters_start_at_the_last_idle_scrape(exporter: Exporter, tmp_path, idle_before) -> None:
    """A run with no warmup sends its first requests as the window opens, and the start mark's own
    scrape is answered after them (real vLLM on a busy box: 85 ms late, the cold first requests
    missed; in CI all of a 1.9-s cell's). The last scrape answered before the window, with nothing
    of the run sent since, holds the counters' starting values; it is the baseline when the run
    says so (`idle_before`), else the mark's scrape is, and the traffic before it is not counted."""
    s = TelemetrySession(target_url=exporter.url, config=Telemetry(interval_s=30), out_dir=tmp_path, engine_kind="vllm")
    s.start()
    scraped(tmp_path, "the idle scrape before the window", lambda x: x.get("ok"))
    exporter.cmd("active")  # the first requests: admitted before the mark's scrape is answered
    wait_until(lambda: exporter.cmd("peek")["prompt_tokens"] >= 400, "traffic before the mark's scrape")
    before_mark = exporter.cmd("peek")["prompt_tokens"]
    s.mark_window_start(idle_before=idle_before)
    scraped(tmp_path, "the start mark's scrape", lambda x: x.get("mark") == "start")
    truth = exporter.cmd("idle")
    s.mark_window_end()
    block = s.stop()

    if idle_before:
        assert block["prompt_tokens"] == truth["prompt_tokens"] > 0
        assert block["prefix_cache"]["queries"] == truth["prefix_queries"]
        assert block["telemetry"]["baseline_at"] < block["telemetry"]["final_at"]
    else:
        assert block["prompt_tokens"] <= truth["prompt_tokens"] - before_mark
    assert block["telemetry"]["scrapes"] == 2  # the mark's scrape and the final: gauges of the window only
