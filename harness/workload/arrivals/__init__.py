"""Arrival patterns for open-loop load: one module each in this folder, registered by name.

A pattern is everything the harness knows about one way requests arrive, behind one Protocol:

- `steady_offsets`: the intended send times (seconds from the window start, unbounded, before
  the ramp) of a steady load at `load.rate`, drawn from the seeded generator it is given;
  `harness.workload.schedule.arrival_offsets` applies the ramp and splits them among workers;
- `check`: fail early, in one line, on a bad input of its own (a trace file), before any load;
- `fingerprint`: the scenario's `load` block as it enters the fingerprint (a file's content, not
  where it lives), so only like is compared with like;
- `summary`: what summary.json's `load` block records about it beyond rate, arrival, burstiness.

The run lifecycle (harness.run.prepare/finish), the schedule and the fingerprint ask the pattern
named by `load.arrival` and know no pattern by name. The scenario's `load.arrival` choices are the
module names of this folder, read without importing them (harness.scenario.choices), so a new
pattern is one file here (plus its options model in harness.scenario.models, when it has options).

Multi-turn sessions sit on the same seam: a session's first turn is request i of this schedule
(its arrival is the pattern's); its later turns arrive at the previous reply's end plus a think
time (harness.workload.sessions, driven by harness.load.sessions).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from harness.registry import Registry
from harness.scenario.models import Load


class ArrivalPattern(Protocol):
    def steady_offsets(self, load: Load, rng: np.random.Generator, base_dir: Path | None) -> Iterator[float]:
        """Seconds from the window start of request 0, 1, 2, ... at the steady `load.rate`
        (unbounded). `base_dir`: where the scenario's relative paths start."""
        ...

    def check(self, load: Load, base_dir: Path | None) -> None:
        """Raise UserError (one line per problem) on a bad input of the pattern's own."""
        ...

    def fingerprint(self, load: dict[str, Any], base_dir: Path | None) -> dict[str, Any]:
        """The scenario's `load` block (JSON form) as it enters the fingerprint."""
        ...

    def summary(self, load: Load) -> dict[str, Any]:
        """Keys summary.json's open-loop `load` block adds for this pattern."""
        ...


class Pattern:
    """Defaults for a pattern with no inputs of its own: nothing to check, the load block
    fingerprinted as it is, nothing to add to the summary."""

    def check(self, load: Load, base_dir: Path | None) -> None:
        return None

    def fingerprint(self, load: dict[str, Any], base_dir: Path | None) -> dict[str, Any]:
        return load

    def summary(self, load: Load) -> dict[str, Any]:
        return {}


class GapPattern(Pattern):
    """A renewal process: independent gaps drawn one by one; request 0 arrives after the first gap."""

    def gap(self, rng: np.random.Generator, rate: float, burstiness: float) -> float:
        """Seconds until the next arrival at `rate` req/s."""
        raise NotImplementedError

    def steady_offsets(self, load: Load, rng: np.random.Generator, base_dir: Path | None) -> Iterator[float]:
        assert load.rate is not None
        u = 0.0
        while True:
            u += self.gap(rng, load.rate, load.burstiness)
            yield u


ARRIVALS: Registry[ArrivalPattern] = Registry("arrival process")


def _register_all() -> None:
    """Import every pattern module of this folder (each registers itself under its module name)."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


def get_arrival(name: str) -> ArrivalPattern:
    _register_all()
    return ARRIVALS.get(name)


def arrival_names() -> list[str]:
    _register_all()
    return ARRIVALS.names()
