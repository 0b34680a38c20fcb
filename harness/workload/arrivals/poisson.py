"""Poisson arrivals: exponential gaps, the memoryless traffic of many independent users."""

from __future__ import annotations

import numpy as np

from harness.workload.arrivals import ARRIVALS, GapPattern


class Poisson(GapPattern):
    def gap(self, rng: np.random.Generator, rate: float, burstiness: float) -> float:
        return float(rng.exponential(1.0 / rate))


ARRIVALS.add("poisson", Poisson())
