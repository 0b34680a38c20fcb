"""Window arithmetic: histogram quantiles vs known buckets, counter resets, late series."""

from __future__ import annotations

import math

import pytest

from harness.engines import profiles
from harness.telemetry.exposition import parse
from harness.telemetry.window import WindowAccumulator, histogram_quantile

INF = math.inf
BUCKETS = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 40.0)]


@pytest.mark.parametrize(
    "q, value, bounds",
    [
        (0.5, 0.3, (0.1, 0.5)),  # rank 20: 0.1 + 0.4 * (20-10)/(30-10)
        (0.99, 0.98, (0.5, 1.0)),  # rank 39.6: 0.5 + 0.5 * 9.6/10
        (0.05, 0.02, (0.0, 0.1)),  # first bucket starts at 0
        (0.25, 0.1, (0.0, 0.1)),  # rank exactly at a bucket edge
        (1.0, 1.0, (0.5, 1.0)),
    ],
)
def test_quantiles_match_prometheus_rules(q: float, value: float, bounds: tuple) -> None:
    est, lo, hi = histogram_quantile(q, BUCKETS)
    assert est == pytest.approx(value) and (lo, hi) == pytest.approx(bounds)


def test_quantile_in_inf_bucket_returns_highest_finite_bound() -> None:
    assert histogram_quantile(0.99, [(0.1, 5.0), (0.5, 5.0), (INF, 10.0)]) == (0.5, 0.5, INF)


def test_quantile_edge_cases() -> None:
    assert histogram_quantile(0.5, []) is None
    assert histogram_quantile(0.5, [(0.1, 0.0), (INF, 0.0)]) is None  # no observations
    assert histogram_quantile(0.5, [(0.1, 3.0), (0.5, 4.0)]) is None  # no +Inf bucket
    # non-monotonic counts (a bucket reset on its own) are made monotonic, as Prometheus does
    # -> (0.1, 10), (0.5, 10), (1.0, 20): rank 15 lies in (0.5, 1.0]
    est, _, _ = histogram_quantile(0.75, [(0.1, 10.0), (0.5, 8.0), (1.0, 20.0), (INF, 20.0)])
    assert est == pytest.approx(0.5 + 0.5 * (15 - 10) / 10)


def _page(pre: float, q: float, extra: str = "") -> str:
    return (
        f'vllm:num_preemptions_total{{engine="0"}} {pre}\nvllm:num_preemptions_total{{engine="1"}} 5\n'
        f'vllm:prefix_cache_queries_total{{engine="0"}} {q}\nvllm:kv_cache_usage_perc{{engine="0"}} 0.5\n' + extra
    )


def _acc(*pages: str) -> WindowAccumulator:
    snaps = [parse(p, float(i)) for i, p in enumerate(pages)]
    acc = WindowAccumulator(profiles().get("vllm"), snaps[0])
    for s in snaps[1:]:
        acc.add(s)
    return acc


def test_counter_reset_counts_everything_after_the_restart() -> None:
    # engine 0 restarts between scrape 2 and 3: 100 -> 140 (+40), restart, 0 -> 25 (+25), -> 30 (+5)
    acc = _acc(_page(100, 1000), _page(140, 1400), _page(25, 300), _page(30, 350))
    assert acc.counter("preemptions") == 40 + 25 + 5
    assert acc.counter("prefix_queries") == 400 + 300 + 50
    assert acc.resets == 1


def test_series_created_after_the_baseline_counts_from_zero() -> None:
    late = 'vllm:request_success_total{engine="0",finished_reason="abort"} 3\n'
    acc = _acc(_page(1, 1), _page(1, 1, late), _page(1, 1, late.replace(" 3", " 4")))
    assert acc.counter("requests_finished") == 4


def test_baseline_only_series_gives_zero_not_none() -> None:
    acc = _acc(_page(7, 9), _page(7, 9))
    assert acc.counter("preemptions") == 0 and acc.counter("spec_drafts") is None


def test_out_of_order_scrape_is_ignored() -> None:
    profile = profiles().get("vllm")
    acc = WindowAccumulator(profile, parse(_page(1, 1), 10.0))
    acc.add(parse(_page(5, 1), 5.0))
    assert acc.counter("preemptions") == 0 and acc.scrapes == 1
