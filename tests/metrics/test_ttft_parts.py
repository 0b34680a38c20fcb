"""TTFT split by the server's timing (harness/metrics/ttft_parts.py): the shares over every request
and over the p99 tail, the slowest requests, lossless merging, and the cache outcome per class."""

from __future__ import annotations

import json

import pytest

from harness.metrics.record import RequestRecord
from harness.metrics.recorder import ALL, MetricSet
from harness.metrics.table import derive
from harness.metrics.ttft_parts import TtftParts

MS = 1_000_000


def _rec(i: int, queue_ms: float, prefill_ms: float = 10, network_ms: float = 2, **kw) -> RequestRecord:
    """Closed loop: sent at 0, first chunk after network + queue + prefill."""
    ttft = round((network_ms + queue_ms + prefill_ms) * MS)
    return RequestRecord(
        index=i,
        class_name=kw.pop("class_name", "c"),
        request_id=f"r{i}",
        sent_ns=1_000 * MS,
        chunk_ns=[1_000 * MS + ttft],
        chunk_tokens=[1],
        output_tokens=1,
        input_tokens=100,
        server_timing=kw.pop("server_timing", "vllm"),
        server_queue_ns=round(queue_ms * MS),
        server_prefill_ns=round(prefill_ms * MS),
        **kw,
    )


def test_the_tail_is_split_apart_from_the_mean() -> None:
    """99 fast requests that never queue, one that waited 500 ms: the mean is mostly prefill, the
    p99 tail is almost all queue (what a percentile of each part alone cannot say)."""
    ms = MetricSet()
    for i in range(99):
        ms.record(_rec(i, queue_ms=0))
    ms.record(_rec(99, queue_ms=500))
    b = ms.classes[ALL].summarize(1.0)["ttft_breakdown"]
    assert b["requests"] == 100 and b["partial"] == 0
    assert b["mean_ms"]["queue"] == pytest.approx(5.0) and b["mean_ms"]["prefill"] == pytest.approx(10.0)
    assert b["tail"]["requests"] == 1 and b["tail"]["share"]["queue"] == pytest.approx(500 / 512)
    assert b["slowest"][0] == {
        "id": "r99",
        "ttft_ms": pytest.approx(512.0),
        "parts_ms": {"send_lag": 0.0, "network": pytest.approx(2.0), "queue": 500.0, "prefill": 10.0},
    }
    assert len(b["slowest"]) == 5 and [s["ttft_ms"] for s in b["slowest"]] == sorted(
        (s["ttft_ms"] for s in b["slowest"]), reverse=True
    )
    # the parts add up to TTFT: shares sum to 1
    assert sum(b["share"].values()) == pytest.approx(1.0)


def test_merge_of_two_processes_equals_one() -> None:
    whole, a, b = MetricSet(), MetricSet(), MetricSet()
    for i in range(300):
        r = _rec(i, queue_ms=(i * 37) % 101, prefill_ms=5 + i % 7)
        whole.record(r)
        (a if i % 2 else b).record(r)
    merged = MetricSet()
    for part in (a, b):
        merged.merge_dict(json.loads(json.dumps(part.to_dict())))
    assert merged.classes[ALL].summarize(1.0)["ttft_breakdown"] == whole.classes[ALL].summarize(1.0)["ttft_breakdown"]


def test_requests_without_a_queue_time_are_counted_not_split() -> None:
    parts = TtftParts()
    r = _rec(0, queue_ms=0, server_timing="llama.cpp")
    r.server_queue_ns = None  # llama.cpp times the prefill only
    parts.record(r.request_id, True, derive(r))
    assert parts.summarize() == {"requests": 0, "partial": 1}
    assert TtftParts().summarize() is None  # nothing timed at all: no block


def test_cache_outcome_per_class_and_ideal() -> None:
    ms = MetricSet()
    ms.record(_rec(0, 0, cached_tokens=64))  # 64 of 100 prompt tokens from cache
    ms.record(_rec(1, 0, cached_tokens=0, ideal_cached_tokens=96))
    no_usage = _rec(2, 0, class_name="d")
    ms.record(no_usage)
    c = ms.by_class["c"].summarize(1.0)["cache"]
    assert c == {
        "requests_reporting": 2,
        "prompt_tokens": 200,
        "cached_tokens": 64,
        "hit_rate": 0.32,
        "ideal_cached_tokens": 96,
        "ideal_hit_rate": 0.96,
    }
    assert "cache" not in ms.by_class["d"].summarize(1.0)  # the server said nothing: no guess
    requests = json.loads(json.dumps(_rec(3, 4).to_json()))
    assert requests["server"] == {"timing": "vllm", "queue_ms": 4.0, "prefill_ms": 10.0, "decode_ms": None}
    assert requests["ttft_parts_ms"] == {"network": 2.0, "queue": 4.0, "prefill": 10.0}
