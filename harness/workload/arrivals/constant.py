"""Constant arrivals: exactly 1/rate seconds apart."""

from __future__ import annotations

import numpy as np

from harness.workload.arrivals import ARRIVALS


class Constant:
    def gap(self, rng: np.random.Generator, rate: float, burstiness: float) -> float:
        return 1.0 / rate


ARRIVALS.add("constant", Constant())
