"""Open-loop arrival processes and the ramp: exact where exact, statistical (seeded) otherwise."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from harness.errors import UserError
from harness.scenario.models import Fixed, Load, LogNormal, Normal, Uniform
from harness.workload.arrivals import get_arrival
from harness.workload.lengths import mean_length, sample_length
from harness.workload.schedule import arrival_offsets, worker_share


def _offsets(n: int, seed: int = 0, **load) -> np.ndarray:
    return np.array(list(itertools.islice(arrival_offsets(Load(duration_s=1, **load), seed), n)))


def test_constant_gaps_exact() -> None:
    t = _offsets(100, rate=4.0, arrival="constant")
    assert t[0] == 0.0
    assert np.allclose(np.diff(t), 0.25, rtol=0, atol=1e-12)
    assert t[-1] == pytest.approx(99 * 0.25)


def test_constant_offsets_do_not_drift() -> None:
    # summing 0.1 ten times gives 0.9999999999999999: a request "at" 1.0 s fell inside a 1 s window
    t = _offsets(1001, rate=10.0, arrival="constant")
    assert list(t) == [k / 10.0 for k in range(1001)]
    assert t[10] == 1.0 and t[1000] == 100.0


def test_poisson_mean_and_cv() -> None:
    rate, n = 20.0, 20_000
    gaps = np.diff(np.concatenate([[0.0], _offsets(n, seed=3, rate=rate, arrival="poisson")]))
    # mean of n exponential gaps: standard error (1/rate)/sqrt(n) = 0.00035 s; allow 5 of them
    assert gaps.mean() == pytest.approx(1 / rate, abs=5 * (1 / rate) / math.sqrt(n))
    cv = gaps.std() / gaps.mean()
    assert cv == pytest.approx(1.0, abs=0.05)  # exponential: CV 1
    assert (gaps > 0).all()


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_mean_kept_variance_set_by_burstiness(burstiness: float) -> None:
    rate, n = 10.0, 20_000
    gaps = np.diff(np.concatenate([[0.0], _offsets(n, seed=5, rate=rate, arrival="gamma", burstiness=burstiness)]))
    cv2 = 1 / burstiness  # gamma with shape k: CV^2 = 1/k
    se = (1 / rate) * math.sqrt(cv2 / n)
    assert gaps.mean() == pytest.approx(1 / rate, abs=5 * se)
    assert (gaps.std() / gaps.mean()) ** 2 == pytest.approx(cv2, rel=0.1)


def test_gamma_burstier_has_larger_variance() -> None:
    v = [np.diff(_offsets(5000, seed=1, rate=5.0, arrival="gamma", burstiness=b)).var() for b in (0.3, 1.0, 3.0)]
    assert v[0] > v[1] > v[2]


def test_same_seed_same_arrivals_other_seed_other() -> None:
    a = _offsets(200, seed=9, rate=3.0)
    assert np.array_equal(a, _offsets(200, seed=9, rate=3.0))
    assert not np.array_equal(a, _offsets(200, seed=10, rate=3.0))


def test_ramp_warp_is_monotone_and_continuous() -> None:
    ramp = 10.0
    t = _offsets(400, seed=2, rate=8.0, arrival="constant", ramp_s=ramp)
    assert (np.diff(t) > 0).all()
    # constant steady process u_i = i/8: t = sqrt(2*T*u) up to u = T/2, then u + T/2
    u = np.arange(400) / 8.0
    expected = np.where(u <= ramp / 2, np.sqrt(2 * ramp * u), u + ramp / 2)
    assert np.allclose(t, expected, atol=1e-9)
    # the rate grows linearly: arrivals in the first half of the ramp are a quarter of the ramp's
    in_ramp = (t < ramp).sum()
    in_first_half = (t < ramp / 2).sum()
    assert in_ramp == pytest.approx(8.0 * ramp / 2, abs=1)
    assert in_first_half == pytest.approx(in_ramp / 4, abs=1)
    # after the ramp, the full rate
    after = t[(t >= ramp) & (t < ramp + 20)]
    assert np.allclose(np.diff(after), 1 / 8.0)


def test_worker_share_partitions_the_stream() -> None:
    load = Load(rate=7.0, duration_s=1)
    single = list(itertools.islice(arrival_offsets(load, 4), 90))
    parts = [list(itertools.islice(worker_share(arrival_offsets(load, 4), w, 3), 30)) for w in range(3)]
    merged = sorted(p for part in parts for p in part)
    assert [i for i, _ in merged] == list(range(90))
    assert [o for _, o in merged] == single
    assert all(i % 3 == w for w, part in enumerate(parts) for i, _ in part)


def test_unknown_arrival_lists_choices() -> None:
    with pytest.raises(UserError) as info:
        get_arrival("bursty")
    assert info.value.lines == ["unknown arrival process 'bursty'; choose one of: constant, gamma, poisson, trace"]


# ---------------------------------------------------------------- lengths
def test_fixed_and_uniform_lengths() -> None:
    rng = np.random.default_rng(0)
    assert {sample_length(Fixed(value=7), rng) for _ in range(20)} == {7}
    vals = [sample_length(Uniform(dist="uniform", min=3, max=6), rng) for _ in range(2000)]
    assert set(vals) == {3, 4, 5, 6}  # both ends included


def test_normal_clipped_to_bounds() -> None:
    rng = np.random.default_rng(1)
    d = Normal(dist="normal", mean=100, std=50, min=80, max=120)
    vals = [sample_length(d, rng) for _ in range(2000)]
    assert min(vals) == 80 and max(vals) == 120
    assert all(isinstance(v, int) for v in vals)


def test_lognormal_mean_is_the_given_mean() -> None:
    rng = np.random.default_rng(2)
    d = LogNormal(dist="lognormal", mean=300, sigma=0.5)
    vals = np.array([sample_length(d, rng) for _ in range(20_000)])
    # sd of lognormal with sigma .5 and mean 300 is 300*sqrt(e^.25 - 1) = 160; se = 1.13
    assert vals.mean() == pytest.approx(300, abs=6)
    assert mean_length(d) == 300 and mean_length(Uniform(dist="uniform", min=2, max=5)) == 3.5
