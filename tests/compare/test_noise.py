"""The comparison's noise tests: Holm's family-wise control, time blocks for tail percentiles,
a zero-goodput baseline, the engine's counters. Runs are fabricated in the run-directory contract
(tests/report/fabricate.py) and read back by the report's reader, as `harness compare` does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.compare import Options, compare_runs, resolve, stats
from harness.compare.metrics import METRICS
from harness.compare.noise import engine_interval
from harness.report.data import load_run
from tests.report.fabricate import make_run


def test_holm_adjusts_in_order_and_never_decreases():
    assert stats.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert stats.holm([0.001]) == [0.001]
    assert stats.holm([]) == []
    # all true nulls: at 5% the family rejects nothing more often than 5% of the time
    rng = np.random.default_rng(0)
    families = rng.uniform(size=(4000, 11))
    any_raw = np.mean([(f < 0.05).any() for f in families])
    any_holm = np.mean([min(stats.holm(list(f))) < 0.05 for f in families])
    assert any_raw > 0.35 and any_holm <= 0.06, (any_raw, any_holm)


def test_p_value_agrees_with_the_interval():
    rng = np.random.default_rng(1)
    clear = rng.normal(5.0, 1.0, 2000)
    assert stats.p_value(clear) < 1e-5
    vague = rng.normal(0.5, 1.0, 2000)
    lo, hi = stats.interval(vague, 0.95)
    assert lo < 0 < hi and stats.p_value(vague) > 0.05


def test_time_blocks_follow_start_order_and_the_median_request():
    reqs = [{"sent_ns": int(i * 1e8), "e2e_ms": 500.0} for i in range(100)][::-1]  # written out of order
    blocks = stats.time_blocks(reqs, first=3)
    assert blocks.min() == 3 and len(set(blocks.tolist())) == 19  # 9.9 s / 0.5 s median request
    starts = [r["sent_ns"] for r in reqs]
    assert all(blocks[i] <= blocks[j] for i in range(100) for j in range(100) if starts[i] < starts[j])


def test_tail_interval_from_time_blocks_is_wider_where_requests_stall_together():
    """A run whose requests in one stretch of time all waited for the same stall (a host hiccup):
    the neighbours' latencies move together, so the run holds one stall, not 40 independent slow
    requests. Resampling time blocks gives the p99 the wider interval that holds; resampling
    requests one by one (the old test) gave one that two identical runs fell outside of."""
    rng = np.random.default_rng(7)
    n = 600
    ttft = rng.lognormal(np.log(80.0), 0.3, n)
    ttft[300:340] += 400.0  # one shared stall
    reqs = [{"sent_ns": int(i * 5e7), "e2e_ms": 1000.0} for i in range(n)]
    blocks = stats.time_blocks(reqs)
    assert 8 <= len(set(blocks.tolist())) <= stats.MAX_BLOCKS

    def width(owner: np.ndarray) -> float:
        _, d = stats.cluster_quantile_draws((ttft, owner), [99.0], 2000, np.random.default_rng(1))[99.0]
        lo, hi = stats.interval(d, 0.95)
        return hi - lo

    assert width(blocks) > 1.5 * width(np.arange(n))


def test_a_slower_engine_is_caught_and_holm_is_reported(tmp_path):
    a = load_run(make_run(tmp_path / "a", seed=1, n=300))
    slow = load_run(make_run(tmp_path / "slow", seed=2, n=300, speed=0.85))
    rows = {r.key: r for r in compare_runs([a], [slow], resolve(None), Options())}
    assert rows["itl.p50"].verdict == "REGRESSION" and rows["itl.p50"].p_adjusted < 0.05
    assert any("Holm-adjusted over" in t for t in rows["itl.p50"].tests)
    tested = [r for r in rows.values() if r.p_value is not None]
    assert all(r.p_adjusted >= r.p_value for r in tested)


def test_zero_goodput_baseline_is_tested_on_the_share_of_good_requests(tmp_path):
    """No baseline request met the SLOs (TPOT 60 ms > 40): goodput has no base for a relative
    change, so the share of good requests is tested (one-sided Fisher exact)."""
    bad = load_run(make_run(tmp_path / "bad", seed=3, n=60, speed=0.3))
    good = load_run(make_run(tmp_path / "good", seed=4, n=60))
    (row,) = compare_runs([bad], [good], [METRICS["goodput_rps"]], Options())
    assert row.baseline == 0 and row.change is None
    assert row.verdict == "improved" and any("Fisher" in t for t in row.tests), row
    (same,) = compare_runs([bad], [bad], [METRICS["goodput_rps"]], Options())
    assert same.verdict != "improved"


def test_fisher_exact_one_sided_matches_hand_computed_values():
    assert stats.fisher_greater(0, 10, 1, 10) == pytest.approx(0.5)  # 1 good of 20: on either side with equal odds
    assert stats.fisher_greater(0, 20, 3, 20) == pytest.approx(6840 / 59280)  # C(20,3)/C(40,3)
    assert stats.fisher_greater(0, 23, 65, 65) < 1e-20


def test_engine_counters_have_slice_intervals(tmp_path):
    a = load_run(make_run(tmp_path / "a", seed=5, n=200, preemption_rate=2.0))
    b = load_run(make_run(tmp_path / "b", seed=6, n=200, preemption_rate=2.0))
    rows = compare_runs([a], [b], [METRICS["preemptions"], METRICS["prefix_hit_rate"]], Options())
    assert {r.key for r in rows} == {"preemptions", "prefix_hit_rate"}
    for r in rows:
        assert r.verdict in ("ok", "within noise", "n/a"), r


def test_with_repeats_the_interval_is_of_the_mean_of_the_runs_and_holds_its_change(tmp_path):
    """A side with two runs of different speed: the change column is the mean of the runs'
    percentiles, so its interval must be of that statistic (each run resampled on its own). A
    bootstrap of the pooled requests printed TPOT p50 +10.6% with the interval [+26.3, +140.5]%
    on the vLLM CPU build, and called a drift that the runs did not show."""
    fast = load_run(make_run(tmp_path / "fast", seed=11, n=60, speed=1.0))
    slow = load_run(make_run(tmp_path / "slow", seed=12, n=300, speed=0.4))
    mid = load_run(make_run(tmp_path / "mid", seed=13, n=120, speed=0.7))
    rows = {
        r.key: r for r in compare_runs([fast, slow], [mid], resolve(["ttft.p50", "tpot.p50", "e2e.p50"]), Options())
    }
    for key, r in rows.items():
        assert r.interval is not None and r.change is not None, r
        assert r.interval[0] <= r.change <= r.interval[1], (key, r.change, r.interval)
        assert any("each run resampled on its own" in t for t in r.tests)
    # one run a side: the single-run test, unchanged
    one = compare_runs([fast], [mid], resolve(["ttft.p50"]), Options())[0]
    assert not any("each run" in t for t in one.tests) and one.interval is not None


def test_a_hit_rate_interval_is_of_the_figure_the_summary_reports():
    """vLLM 0.26 on an H100 (results/examples/gpu-h100-vllm-tune, the cache-check step): requests
    queued, so the engine looked prompts up 8x per prompt token and hits/queries read 7%, while the
    summary reports cached / prompt tokens, 41%. The interval tune and compare print beside it must
    be of the same figure."""
    steps = Path(__file__).resolve().parents[2] / "results" / "examples" / "gpu-h100-vllm-tune" / "steps"
    (run_dir,) = (steps / "07-cache-check" / "runs").iterdir()
    run = load_run(run_dir)
    pc = run.summary.engine.prefix_cache
    assert pc is not None and pc.hit_rate_from == "prompt_tokens_cached" and pc.lookup_hit_rate < 0.1
    iv = engine_interval(METRICS["prefix_hit_rate"], [run], Options())
    assert iv is not None
    value, low, high = iv
    assert abs(value - 100 * pc.hit_rate) < 1.0
    assert low < 100 * pc.hit_rate < high
