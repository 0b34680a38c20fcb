"""Parsing pages: both spellings, `_created` skipped, content checks, the prefilter."""

from __future__ import annotations

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.openmetrics.exposition import (
    generate_latest as generate_openmetrics,
)

from harness.telemetry.exposition import (
    TelemetryUnavailable,
    check_content_type,
    names_in,
    parse,
    prefilter,
)

from .pages import VLLM_A


def _registry() -> CollectorRegistry:
    r = CollectorRegistry()
    Counter("vllm:num_preemptions", "p", ["engine"], registry=r).labels("0").inc(3)
    Gauge("vllm:kv_cache_usage_perc", "kv", ["engine"], registry=r).labels("0").set(0.5)
    Histogram("vllm:e2e_request_latency_seconds", "e2e", ["engine"], buckets=[1, 2], registry=r).labels("0").observe(
        1.5
    )
    return r


@pytest.mark.parametrize("fmt", ["text", "openmetrics"])
def test_both_spellings_give_the_same_snapshot(fmt: str) -> None:
    """prometheus_client's OpenMetrics output escapes `vllm:` to `vllm_` (client_python #1177)."""
    r = _registry()
    if fmt == "text":
        text, ctype = generate_latest(r).decode(), "text/plain; version=0.0.4"
        assert "vllm:num_preemptions_total" in text
    else:
        text, ctype = generate_openmetrics(r).decode(), "application/openmetrics-text; version=1.0.0"
        assert "vllm_num_preemptions_total{" in text  # the trap, as served
    snap = parse(text, 1.0, content_type=ctype)
    assert snap.get("vllm_num_preemptions_total") == [((("engine", "0"),), 3.0)]
    assert snap.get("vllm_kv_cache_usage_perc")[0][1] == 0.5
    buckets = {dict(lab)["le"]: v for lab, v in snap.get("vllm_e2e_request_latency_seconds_bucket")}
    assert buckets == {"1.0": 0.0, "2.0": 1.0, "+Inf": 1.0}
    assert not [n for n in snap.names() if n.endswith("_created")]


def test_prefilter_keeps_only_wanted_and_parses_identically() -> None:
    wanted = {"vllm_num_requests_running", "vllm_time_to_first_token_seconds_bucket"}
    full = parse(VLLM_A, 0.0)
    filtered = parse(VLLM_A, 0.0, wanted=wanted)
    assert filtered.names() == wanted
    for n in wanted:
        assert filtered.get(n) == full.get(n)
    assert "# HELP" not in prefilter(VLLM_A, wanted)


def test_names_in_normalizes() -> None:
    names = names_in(VLLM_A)
    assert "vllm_kv_cache_usage_perc" in names and "vllm_cache_config_info" in names


@pytest.mark.parametrize(
    "ctype, body, fragment",
    [
        ("text/html; charset=utf-8", "<html><body>Not here</body></html>", "HTML"),
        ("application/json", '{"detail": "Not Found"}', "JSON"),
        ("text/plain", "<!DOCTYPE html><html></html>", "HTML"),
        (None, '{"a": 1}', "HTML/JSON"),
    ],
)
def test_content_type_refusals(ctype: str | None, body: str, fragment: str) -> None:
    with pytest.raises(TelemetryUnavailable) as err:
        check_content_type(ctype, body)
    assert err.value.permanent and fragment in err.value.reason


@pytest.mark.parametrize(
    "junk", ["this is not { a metrics page", "metric_a 1.0\nmetric_b not-a-number\n", 'x{a="1" 2\n']
)
def test_garbage_raises_a_clear_reason(junk: str) -> None:
    with pytest.raises(TelemetryUnavailable) as err:
        parse(junk, 0.0, content_type="text/plain")
    assert "not Prometheus exposition" in err.value.reason and err.value.permanent
