"""Arrival processes for open-loop load, one module each, registered by name.

Each process yields inter-arrival gaps (seconds) for a steady rate; `schedule.arrival_offsets`
applies the ramp and turns gaps into intended send offsets from the start of the window.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from harness.registry import Registry


class ArrivalProcess(Protocol):
    def gap(self, rng: np.random.Generator, rate: float, burstiness: float) -> float:
        """Seconds until the next arrival at `rate` req/s."""
        ...


ARRIVALS: Registry[ArrivalProcess] = Registry("arrival process")


def get_arrival(name: str) -> ArrivalProcess:
    from harness.workload.arrivals import constant, gamma, poisson  # noqa: F401

    return ARRIVALS.get(name)
