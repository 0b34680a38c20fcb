"""Pinned arrival offsets and fingerprints: the arrival seam (harness.workload.arrivals) reshaped
the code that makes them, and must not have moved a single one.

The numbers were computed on main at 28a6945, before the seam (schedule.py with its trace and
constant branches, fingerprint.py with its trace path). A change here changes every open-loop
run's send times or makes old runs incomparable: only on purpose, with a note saying why.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from harness.scenario import Scenario
from harness.scenario.models import Load
from harness.workload.fingerprint import fingerprint
from harness.workload.schedule import arrival_offsets

TRACE = "1000\n1000\n1003\n1500\n3000\n3001\n3002\n7000\n"  # ms: bursts and lulls

LOADS = {
    "poisson": {"rate": 3.0},
    "gamma": {"rate": 5.0, "arrival": "gamma", "burstiness": 0.4},
    "constant": {"rate": 7.0, "arrival": "constant"},
    "poisson-ramp": {"rate": 4.0, "ramp_s": 3.0},
    "trace": {"rate": 2.0, "arrival": "trace", "trace": {"path": "t.txt", "unit": "ms"}},
    "trace-ramp": {"rate": 9.0, "arrival": "trace", "trace": {"path": "t.txt", "unit": "ms"}, "ramp_s": 2.0},
}

# fmt: off
# (pinned values: one pattern a row, as they were recorded)
PINNED: dict[str, list[float]] = {
    'constant': [0.0, 0.14285714285714285, 0.2857142857142857, 0.42857142857142855, 0.5714285714285714, 0.7142857142857143, 0.8571428571428571, 1.0],
    'gamma': [0.009213966101155964, 0.8816561998560974, 1.1815244594415573, 1.2202276060319897, 1.2202333695626721, 1.2439786432509092, 1.329579120651209, 1.334056250879201],
    'poisson': [0.021893896249932796, 0.6433275873142907, 1.6239390424660223, 2.0234845619646937, 2.756971025652187, 3.256616648991158, 3.5761422984105127, 3.6798388770623034],
    'poisson-ramp': [0.31388299272929326, 1.7014623542454028, 2.7032805424330455, 3.0176134214735204, 3.5677282692391405, 3.9424624867433686, 4.182106723807885, 4.259879157796728],
    'trace': [0.0, 0.0, 0.0017500000000000664, 0.2916666666666667, 1.1666666666666667, 1.1672500000000001, 1.1678333333333337, 3.5000000000000004],
    'trace-ramp': [0.0, 0.0, 0.03944053188733152, 0.5091750772173156, 1.0183501544346312, 1.018604710157751, 1.0188592022816862, 1.763834207376394],
}

PINNED_FINGERPRINTS: dict[str, str] = {
    'poisson': '7dc1699f26140548',
    'trace': 'c310ce28838ecba3',
    'constant': '2a4dbc6d82d5331d',
}
# fmt: on


def _scenario(load: dict) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "pin",
            "seed": 11,
            "load": {**load, "requests": 50},
            "workload": {"classes": [{"name": "c", "input_tokens": 10, "output_tokens": 5}]},
        }
    )


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    (tmp_path / "t.txt").write_text(TRACE)
    return tmp_path


@pytest.mark.parametrize("name", sorted(LOADS))
def test_offsets_are_the_ones_before_the_seam(name: str, trace_dir: Path) -> None:
    load = Load(duration_s=1, **LOADS[name])
    got = list(itertools.islice(arrival_offsets(load, 11, trace_dir), 8))
    assert got == PINNED[name]  # exactly: the same float operations in the same order


@pytest.mark.parametrize("name", sorted(PINNED_FINGERPRINTS))  # a trace's: its content, not its path
def test_fingerprints_are_the_ones_before_the_seam(name: str, trace_dir: Path) -> None:
    assert fingerprint(_scenario(LOADS[name]), base_dir=trace_dir)["value"] == PINNED_FINGERPRINTS[name]


# ---------------------------------------------------------------- sessions: later turns arrive after a think time
THINK = {
    "fixed": {"dist": "fixed", "value": 1.5},
    "uniform": {"dist": "uniform", "min": 0.5, "max": 2.0},
    "exponential": {"dist": "exponential", "mean": 2.0, "max": 2.5},
    "lognormal": {"dist": "lognormal", "mean": 1.0, "sigma": 0.8, "max": 1.8},
}

# fmt: off
PINNED_THINK: dict[str, list[float]] = {
    'fixed': [1.5, 1.5, 1.5, 1.5, 1.5, 1.5],
    'uniform': [0.6284737507154365, 0.8552157598941496, 1.7019116978095954, 1.3732430540965517, 0.6411929633605988, 1.1496904103547108],
    'exponential': [0.22002962535607967, 0.7793137471474076, 2.5, 2.5, 0.6869876383366448, 0.5156710461437624],
    'lognormal': [1.8, 0.09399327657657457, 1.0145844069659542, 0.46106525966800904, 0.5055443883029797, 0.6111103500496847],
}
# fmt: on


@pytest.mark.parametrize("name", sorted(THINK))
def test_think_times_are_the_ones_before_the_seam(name: str) -> None:
    import numpy as np
    from pydantic import TypeAdapter

    from harness.scenario.session import ThinkDist
    from harness.workload.sessions import sample_think

    dist = TypeAdapter(ThinkDist).validate_python(THINK[name])
    rng = np.random.default_rng(3)
    assert [sample_think(dist, rng) for _ in range(6)] == PINNED_THINK[name]
