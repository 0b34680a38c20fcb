"""The one target provider: a given server passes through; none given starts the built-in
simulator once (a fleet's replicas too, the scenario's adapters served), stopped on close."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from harness.run.provider import TargetProvider
from harness.scenario.models import Scenario


def scenario(**target: Any) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "t",
            "target": target,
            "load": {"concurrency": 1, "requests": 2},
            "workload": {"classes": [{"name": "a", "input_tokens": 8, "output_tokens": 4}]},
        }
    )


def models(url: str) -> list[str]:
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as resp:
        return [m["id"] for m in json.loads(resp.read())["data"]]


def test_a_given_server_is_used_as_it_is(tmp_path: Path) -> None:
    with TargetProvider(["--sim-speed", "4"], tmp_path, engine_kind="vllm") as targets:
        t = targets.provide(scenario(url="http://127.0.0.1:9"))
        assert (t.url, t.engine_kind, t.sim) == ("http://127.0.0.1:9", "vllm", None)
        t = targets.provide(scenario(url="http://127.0.0.1:9"), "http://127.0.0.1:8")  # --target wins
        assert t.url == "http://127.0.0.1:8"
        assert targets.sim is None and not (tmp_path / "sim.log").exists()  # nothing was started


def test_no_server_starts_one_simulator_shared_by_later_runs(tmp_path: Path) -> None:
    with TargetProvider(["--sim-speed", "4"], tmp_path) as targets:
        sc = scenario()
        first = targets.provide(sc)
        assert first.engine_kind == "sim" and first.sim is not None and first.sim.log_path == tmp_path / "sim.log"
        again = targets.provide(sc)
        assert again.url == first.url and len(targets.sims) == 1  # not a second simulator
        named = targets.provide(sc, first.url)  # a test of the web UI names the session's simulator
        assert named.engine_kind == "sim" and named.sim is first.sim
        assert models(first.url)
        proc = first.sim.proc
    assert proc is not None and proc.poll() is not None  # closed: the simulator is stopped


def test_a_fleet_of_simulators_becomes_the_scenarios_endpoints(tmp_path: Path) -> None:
    sc = Scenario.model_validate(
        {
            "name": "t",
            "target": {"replicas": 2},
            "load": {"concurrency": 1, "requests": 2},
            "workload": {
                "adapters": {"names": ["lora-a"]},
                "classes": [{"name": "a", "input_tokens": 8, "output_tokens": 4}],
            },
        }
    )
    with TargetProvider(["--sim-speed", "4"], tmp_path) as targets:
        target = targets.provide(sc)
        fleet = target.applied(sc)
        assert fleet.target.endpoints == [s.url for s in targets.sims] and len(targets.sims) == 2
        assert fleet.target.replicas == 1 and target.url == fleet.target.endpoints[0]
        assert (tmp_path / "sim.r1.log").exists()
        for url in fleet.target.endpoints:  # every replica serves the scenario's adapter by name
            assert "lora-a" in models(url)
