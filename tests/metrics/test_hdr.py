"""The HDR façade: counted clamping, exact mean/min/max, lossless encode/merge."""

from __future__ import annotations

import json
import random

import pytest

from harness.metrics.hdr import COUNT, LATENCY, PERCENTILES, Histogram, Range

MS = 1_000_000


def _values(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [int(rng.lognormvariate(16, 1.2)) for _ in range(n)]  # ~9 ms median, long tail


def test_exact_mean_min_max() -> None:
    h = Histogram()
    vals = [1_234_567, 2_000_001, 987_654_321, 5_000]
    for v in vals:
        h.record(v)
    s = h.stats(1.0)
    assert s["count"] == 4 and h.sum == sum(vals)
    assert s["mean"] == sum(vals) / 4
    assert (s["min"], s["max"]) == (5_000, 987_654_321)
    assert "clamped" not in s


def test_percentiles_within_precision_and_never_above_max() -> None:
    h = Histogram()
    for v in range(1, 10_001):
        h.record(v * 1_000)  # 1 µs .. 10 ms
    s = h.stats(1.0)
    for key, pct in PERCENTILES.items():
        exact = pct / 100 * 10_000 * 1_000
        assert s[key] == pytest.approx(exact, rel=2e-3), key  # 3 significant digits
    assert s["p999"] <= s["max"] == 10_000_000


def test_clamping_is_counted() -> None:
    h = Histogram()
    h.record(-5)
    h.record(-1, count=3)
    h.record(LATENCY.highest * 10)
    h.record(5 * MS)
    s = h.stats(MS)
    assert (h.clamped_low, h.clamped_high, h.count) == (4, 1, 6)
    assert s["clamped"] == {"low": 4, "high": 1}
    assert s["min"] == 0 and s["max"] == LATENCY.highest / MS
    assert h.sum == LATENCY.highest + 5 * MS  # clamped values enter the sum as clamped


def test_record_with_count() -> None:
    h = Histogram()
    h.record(3 * MS, count=4)
    assert h.count == 4 and h.sum == 12 * MS and h.stats(MS)["mean"] == 3.0


def test_empty_stats() -> None:
    s = Histogram().stats(MS)
    assert s["count"] == 0 and all(s[k] is None for k in ("mean", "p50", "p99", "max", "min"))


def test_round_trip_through_json() -> None:
    h = Histogram()
    for v in _values(5_000, 1):
        h.record(v)
    h.record(-3)
    back = Histogram.from_dict(json.loads(json.dumps(h.to_dict())))
    assert back.stats(MS) == h.stats(MS)
    assert back.values() == h.values()
    assert (back.sum, back.min, back.max, back.clamped_low) == (h.sum, h.min, h.max, 1)


def test_count_range_round_trip() -> None:
    h = Histogram(COUNT)
    for k in (1, 1, 3, 250):
        h.record(k)
    back = Histogram.from_dict(h.to_dict())
    assert back.range == Range(COUNT.lowest, COUNT.highest)
    assert back.stats() == h.stats() and back.stats()["max"] == 250


def test_merge_of_halves_equals_whole_at_every_percentile() -> None:
    vals = _values(20_000, 7)
    whole, a, b = Histogram(), Histogram(), Histogram()
    for i, v in enumerate(vals):
        whole.record(v)
        (a if i % 2 else b).record(v)
    # as two workers would: encode, ship, decode, merge
    merged = Histogram.from_dict(json.loads(json.dumps(a.to_dict())))
    merged.merge(Histogram.from_dict(json.loads(json.dumps(b.to_dict()))))
    for pct in [0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100]:
        assert merged.percentile(pct) == whole.percentile(pct), pct
    assert merged.stats(MS) == whole.stats(MS)
    assert merged.values() == whole.values()


def test_merge_into_empty_and_of_empty() -> None:
    a, empty = Histogram(), Histogram()
    a.record(7 * MS)
    empty.merge(a)
    assert (empty.min, empty.max, empty.count) == (7 * MS, 7 * MS, 1)
    a.merge(Histogram())
    assert (a.min, a.max, a.count) == (7 * MS, 7 * MS, 1)


def test_reset() -> None:
    h = Histogram()
    h.record(-1)
    h.reset()
    assert h.count == 0 and h.sum == 0 and h.min is None and h.clamped_low == 0
