"""Client vs engine percentiles: warn only when the client is above the engine's bucket bound."""

from __future__ import annotations

from harness.telemetry.block import empty_block
from harness.telemetry.reconcile import reconcile


def engine(ttft=(180.0, [100.0, 250.0]), scrapes=20, reason=None, source="direct") -> dict:
    b = empty_block(source=source, missing_reason=reason, profile="vllm", scrapes=scrapes)
    p50, bucket = ttft
    b["engine_latency_ms"]["ttft"] = {
        "p50": p50,
        "p99": 240.0,
        "mean": 170.0,
        "count": 100,
        "p50_bucket_ms": bucket,
        "p99_bucket_ms": [100.0, 250.0],
    }
    b["engine_latency_ms"]["itl"] = {
        "p50": 30.0,
        "p99": 45.0,
        "mean": 31.0,
        "count": 1000,
        "p50_bucket_ms": [25.0, 50.0],
        "p99_bucket_ms": [25.0, 50.0],
    }
    return b


CLIENT_OK = {"ttft": {"p50": 200.0, "p99": 260.0}, "e2e": {"p50": 900.0}, "itl_token": {"p50": 33.0, "p99": 70.0}}


def test_consistent_numbers_give_no_warning() -> None:
    assert reconcile(CLIENT_OK, engine()) == []


def test_coarse_bucket_does_not_raise_false_alarms() -> None:
    # client 300 ms vs engine estimate 180 ms: above the estimate, but within the bucket (<= 250) + margin
    assert reconcile({"ttft": {"p50": 300.0}}, engine()) == []


def test_client_far_above_engine_ttft() -> None:
    w = reconcile({"ttft": {"p50": 520.0, "p99": 900.0}}, engine())
    assert len(w) == 2
    assert w[0].startswith("Client TTFT p50 is 520 ms") and "bucket 100 ms-250 ms" in w[0]
    assert "at least 270 ms per request is spent outside the engine" in w[0]
    assert "p99" in w[1]


def test_itl_gap() -> None:
    w = reconcile({"itl_token": {"p50": 80.0}}, engine())
    assert len(w) == 1 and "inter-token latency p50" in w[0]


def test_inf_bucket_is_not_compared() -> None:
    assert reconcile({"ttft": {"p50": 99999.0}}, engine(ttft=(2560.0 * 1000, [2560000.0, None]))) == []


def test_too_few_scrapes_and_missing_telemetry() -> None:
    w = reconcile(CLIENT_OK, engine(scrapes=2))
    assert len(w) == 1 and "Only 2 engine scrape(s)" in w[0]
    w = reconcile(CLIENT_OK, empty_block(source="direct", missing_reason="http://x/metrics returned 404"))
    assert w == ["Engine telemetry incomplete: http://x/metrics returned 404."]
    assert reconcile(CLIENT_OK, empty_block(missing_reason="telemetry disabled (telemetry.enabled: false)")) == []
    assert reconcile({}, {}) == []


def test_a_slow_metrics_endpoint_is_named_with_the_span_its_counters_cover() -> None:
    slow = engine()
    slow["telemetry"].update({"scrape_ms": {"mean": 5020.5, "max": 5025.7}, "window_s": 8.359, "scraped_span_s": 5.017})
    w = reconcile(CLIENT_OK, slow)
    assert w == [
        "The engine's /metrics took up to 5.0 s to answer: each scrape shows the engine at an unknown "
        "moment inside that time; its counters span 5.0 s of the 8.4 s window, so engine totals need "
        "not match the client's."
    ]
    quick = engine()
    quick["telemetry"].update({"scrape_ms": {"mean": 40.0, "max": 650.0}, "window_s": 8.0, "scraped_span_s": 7.9})
    assert reconcile(CLIENT_OK, quick) == []  # under 1 s: no warning


def test_an_engine_quantile_inside_the_first_bucket_is_compared_with_its_bound() -> None:
    """A quantile inside the engine's first bucket has no number (audit D8), only its bound: the
    client is still checked against that bound, and the text says "below", not a made-up value."""
    eng = engine(ttft=(None, [0.0, 100.0]))
    assert reconcile({"ttft": {"p50": 110.0}}, eng) == []
    w = reconcile({"ttft": {"p50": 400.0}}, eng)
    assert len(w) == 1 and "puts it at below 100 ms (its first bucket)" in w[0], w
