"""Sampling token lengths from the scenario's distributions (seeded numpy Generator)."""

from __future__ import annotations

import math

import numpy as np

from harness.scenario.models import Fixed, LogNormal, Normal, Uniform


def sample_length(dist: Fixed | Uniform | Normal | LogNormal, rng: np.random.Generator) -> int:
    if isinstance(dist, Fixed):
        return dist.value
    if isinstance(dist, Uniform):
        return int(rng.integers(dist.min, dist.max + 1))
    if isinstance(dist, Normal):
        value = rng.normal(dist.mean, dist.std)
    else:  # LogNormal parameterised by its mean: mu = ln(mean) - sigma^2 / 2
        mu = math.log(dist.mean) - dist.sigma**2 / 2
        value = rng.lognormal(mu, dist.sigma)
    upper = dist.max if dist.max is not None else 10**9
    return int(min(max(round(value), dist.min), upper))


def mean_length(dist: Fixed | Uniform | Normal | LogNormal) -> float:
    if isinstance(dist, Fixed):
        return float(dist.value)
    if isinstance(dist, Uniform):
        return (dist.min + dist.max) / 2
    return float(dist.mean)
