"""Constant arrivals: exactly 1/rate seconds apart, the first at 0."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from harness.scenario.models import Load
from harness.workload.arrivals import ARRIVALS, Pattern


class Constant(Pattern):
    def steady_offsets(self, load: Load, rng: np.random.Generator, base_dir: Path | None) -> Iterator[float]:
        assert load.rate is not None
        for index in itertools.count():
            yield index / load.rate  # no float drift from summing 1/rate


ARRIVALS.add("constant", Constant())
