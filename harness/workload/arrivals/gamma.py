"""Gamma arrivals with vLLM's `burstiness` convention: shape = burstiness, mean gap = 1/rate.

burstiness < 1 is burstier than Poisson, 1 is Poisson, > 1 is more regular.
"""

from __future__ import annotations

import numpy as np

from harness.workload.arrivals import ARRIVALS, GapPattern


class Gamma(GapPattern):
    def gap(self, rng: np.random.Generator, rate: float, burstiness: float) -> float:
        return float(rng.gamma(burstiness, 1.0 / (rate * burstiness)))


ARRIVALS.add("gamma", Gamma())
