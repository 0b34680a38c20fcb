"""The capacity search against the simulated engine over real HTTP: a saturated trial stops early,
and the search finds the boundary the cost model predicts.

The simulator runs slowed down (`--sim-speed 0.1`: ~88 ms steps) so the boundary comes from the
cost model, not from how busy this machine's CPU is: a few ms of scheduling delay per step is
small against 88 ms.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.capacity.search import TrialSettings, run_trial, search_capacity
from harness.run.provider import TargetProvider
from harness.scenario.loader import validate
from harness.scenario.models import Scenario
from harness.sim.cli import build_parser
from harness.sim.config import SimConfig
from harness.sim.costmodel import CostModel

SLOTS, TOKENS, SPEED = 4, 16, 0.1
SIM_ARGS = ["--max-num-seqs", str(SLOTS), "--sim-speed", str(SPEED), "--disable-log-stats"]


def scenario(rate: float, duration_s: float) -> Scenario:
    return validate(
        Scenario,
        {
            "name": "cap",
            "seed": 3,
            "load": {"rate": rate, "arrival": "constant", "duration_s": duration_s},
            "warmup": {"duration_s": 0},
            "slo": {"ttft_ms": 600},
            "workload": {"classes": [{"name": "c", "input_tokens": 16, "output_tokens": TOKENS}]},
            "telemetry": {"enabled": False},
        },
        "test",
    )


def predicted_capacity() -> float:
    """SLOTS requests in flight, each holding its slot for TOKENS steps (the prefill step makes
    the first token) plus the step in which it is admitted, at the cost model's step time."""
    cfg = SimConfig.from_args(build_parser().parse_args(SIM_ARGS))
    step = CostModel.from_config(cfg).step_seconds(0, SLOTS, SLOTS * (16 + TOKENS // 2), False)
    return SLOTS / ((TOKENS + 1) * step)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with TargetProvider(SIM_ARGS, tmp_path_factory.mktemp("sim")) as targets:
        yield targets.start()


def test_an_over_saturated_trial_stops_early_and_says_why(sim, tmp_path: Path) -> None:
    rate = 4 * predicted_capacity()  # four times what it carries: the queue grows ~3x capacity per second
    # a 20-s window: the detector watches at least max(3 s, 20% of the window) before it may stop it
    trial = run_trial(scenario(rate, 20.0), "rate", rate, tmp_path / "t", TrialSettings(target_url=sim.url))
    assert trial.saturated and "over-saturated" in trial.saturated
    assert not trial.passed
    s = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert s["load"]["stopped_early"] == trial.saturated
    assert s["status"] == "partial" and any("stopped early" in w for w in s["validity"]["warnings"])
    assert s["window"]["duration_s"] < 20  # of a 20 s window, its drain included: stopped before its end


@pytest.mark.slow  # 6-9 trials of 6 s (~50 s); fast: the search on known boundaries (test_search.py), a trial over HTTP (above)
def test_the_search_finds_the_cost_models_capacity(sim, tmp_path: Path) -> None:
    capacity = predicted_capacity()  # about 2.7 req/s
    res = search_capacity(
        scenario(1.5, 6.0),
        tmp_path,
        attainment=0.9,
        precision=0.1,
        max_trials=9,
        growth=1.6,
        settings=TrialSettings(target_url=sim.url),
    )
    assert res.converged, res.lines()
    assert res.boundary is not None and res.first_failing is not None
    # the bracket is within the precision, and it straddles the predicted capacity (a short trial
    # just above capacity queues too little to fail, hence the margin above)
    assert (res.first_failing - res.boundary) / res.first_failing <= 0.1
    assert 0.8 * capacity <= res.boundary <= 1.25 * capacity, (capacity, res.lines())
    saved = json.loads((tmp_path / "capacity.json").read_text())
    assert saved["boundary"] == res.boundary and len(saved["trials"]) == len(res.trials)
    for t in res.trials:  # every trial a normal run directory
        assert (Path(t.run_dir) / "summary.json").exists() and (Path(t.run_dir) / "requests.jsonl").exists()


def test_every_trial_starts_with_the_prefix_cache_reset(sim, tmp_path: Path) -> None:
    """The same seeded prompts at every level against one long-lived engine: without a reset the
    second trial is served from the first one's cache (audit N2: hit rates of 25-50% on a workload
    that can produce 0%). Each trial resets it, as `harness run` does, and says so."""
    res = search_capacity(
        scenario(1.0, 3.0),
        tmp_path,
        attainment=0.9,
        precision=0.5,
        max_trials=3,
        growth=2.0,
        settings=TrialSettings(target_url=sim.url),
    )
    assert len(res.trials) >= 2
    for t in res.trials:
        s = json.loads((Path(t.run_dir) / "summary.json").read_text())
        assert s["prefix_cache_isolation"]["mode"] == "reset", s["prefix_cache_isolation"]
        assert not any("Prefix cache hit rate" in w for w in t.warnings), t.warnings
    saved = json.loads((tmp_path / "capacity.json").read_text())
    assert all("warnings" in t for t in saved["trials"])
