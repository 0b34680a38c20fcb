"""Nearest-rank percentiles: the one definition summary, report, compare, CSV and UI share.

The audit's case (N21): 152 TTFT samples whose tail is [.., 325.5, 326.6, 488.7, 516.8] ms. hdrh
rounds the rank (int(0.99 * 152 + 0.5) = 150) and reported 326.6 ms, at or above only 98.7 % of
the samples; nearest rank is ceil(0.99 * 152) = 151, 488.7 ms.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness.compare.stats import quantile_draws
from harness.metrics import percentile
from harness.metrics.hdr import PERCENTILES, Histogram
from harness.report.partial_summary import _pcts
from harness.results import hdr as report_hdr
from harness.telemetry.window import WindowAccumulator

MS = 1_000_000


def _audit_ttft_ms() -> list[float]:
    """152 samples: 148 between 20 and 320 ms, then the audit's four-sample tail."""
    rng = random.Random(7)
    body = sorted(rng.uniform(20.0, 320.0) for _ in range(148))
    return [*body, 325.5, 326.6, 488.7, 516.8]


def _nearest_rank(values: list[float], pct: float) -> float:
    """The definition, written the slow obvious way (ceil on exact fractions)."""
    from fractions import Fraction

    ordered = sorted(values)
    k = max(1, math.ceil(Fraction(str(pct)) / 100 * len(ordered)))
    return ordered[k - 1]


def test_rank_is_the_ceiling_computed_without_float_error() -> None:
    assert percentile.rank(99, 152) == 151
    assert percentile.rank(99, 100) == 99  # 0.99 * 100 is 99.00000000000001 in floats
    assert percentile.rank(99.9, 1000) == 999
    assert percentile.rank(50, 2) == 1
    assert percentile.rank(0, 10) == 1 and percentile.rank(100, 10) == 10
    assert percentile.rank(99, 1) == 1 and percentile.rank(99, 0) == 0
    assert percentile.ranks([50, 99, 99.9], 152).tolist() == [76, 151, 152]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 99, 100, 101, 152, 999, 1001])
@pytest.mark.parametrize("pct", [50.0, 90.0, 99.0, 99.9])
def test_raw_values_match_the_definition(n: int, pct: float) -> None:
    rng = random.Random(n)
    values = [rng.lognormvariate(4, 1) for _ in range(n)]
    assert percentile.of_values(values, pct) == _nearest_rank(values, pct)
    assert percentile.of_values_many(values, [pct])[0] == _nearest_rank(values, pct)


def test_hdr_p99_of_the_audit_sample_is_never_below_the_nearest_rank() -> None:
    values = _audit_ttft_ms()
    h = Histogram()
    for v in values:
        h.record(round(v * MS))
    stats = h.stats(MS)
    for key, pct in PERCENTILES.items():
        exact = _nearest_rank(values, pct)
        assert stats[key] >= exact - 1e-6, key  # never understates
        assert stats[key] <= exact * (1 + 2**-10) + 1e-6, key  # HDR's 3 significant figures
    assert stats["p99"] >= 488.7  # hdrh's rounded rank gave 326.6


@pytest.mark.parametrize("n", [3, 10, 33, 152, 250])
def test_hdr_percentiles_bound_the_nearest_rank_at_small_counts(n: int) -> None:
    rng = random.Random(n)
    values = [int(rng.lognormvariate(18, 1.0)) for _ in range(n)]
    h = Histogram()
    for v in values:
        h.record(v)
    got = h.percentiles([50, 90, 99, 99.9])
    for pct, value in zip([50, 90, 99, 99.9], got, strict=True):
        exact = _nearest_rank(values, pct)
        assert exact <= value <= exact * (1 + 2**-10), (pct, value, exact)
    assert h.percentile(100) == max(values) and h.percentile(0) >= min(values)


def test_report_hist_compare_draws_and_partial_summary_agree() -> None:
    values = _audit_ttft_ms()
    assert report_hdr.from_values(values).quantile(99.0) == 488.7
    point, _ = quantile_draws(np.asarray(values), 99.0, 10, np.random.default_rng(0))
    assert point == 488.7
    assert _pcts(values)["p99"] == 488.7
    # an encoded HDR blob (the report's plots) reads the same rank
    blob = report_hdr.encode_values_b64([round(v * MS) for v in values])
    assert report_hdr.decode(blob).quantile(99.0) == pytest.approx(488.7 * MS, rel=2**-10)


def test_engine_gauge_percentiles_use_the_same_rank() -> None:
    w = WindowAccumulator.__new__(WindowAccumulator)
    w.gauges = {"kv_usage": _audit_ttft_ms()}
    assert w.gauge_stats("kv_usage", percentiles=True)["p99"] == 488.7
