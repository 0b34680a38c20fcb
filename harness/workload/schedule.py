"""Intended send times of open-loop requests, deterministic from the seed.

With a ramp of T seconds the rate grows linearly from 0 to `rate`; the steady process is
time-warped (t = sqrt(2 T u) for u <= T/2, else u + T/2) so the shape of the process is kept.
Every worker computes the same global sequence and takes its own share (index % workers), so
the union over workers is exactly the requested arrival process.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from harness.scenario.models import Load
from harness.workload.arrivals import get_arrival


def arrival_offsets(load: Load, seed: int, base_dir: Path | None = None) -> Iterator[float]:
    """Seconds from the window start of request 0, 1, 2, ... (unbounded): the pattern named by
    `load.arrival` (harness.workload.arrivals), ramped. `base_dir`: where a relative input path of
    the pattern (a trace file) starts (the scenario file's folder)."""
    assert load.rate is not None
    rng = np.random.default_rng([seed, 1])
    ramp = load.ramp_s
    for u in get_arrival(load.arrival).steady_offsets(load, rng, base_dir):
        if ramp > 0:
            yield math.sqrt(2 * ramp * u) if u <= ramp / 2 else u + ramp / 2
        else:
            yield u


def worker_share(offsets: Iterator[float], worker: int, workers: int) -> Iterator[tuple[int, float]]:
    """(global index, offset) pairs that belong to `worker` of `workers`."""
    for index, offset in enumerate(offsets):
        if index % workers == worker:
            yield index, offset
