"""What a load process's users share lives on Locust's Environment, not in module globals."""

from __future__ import annotations

from pathlib import Path

import gevent
import locust
from locust.env import Environment

from harness.load import user
from harness.load.controller import LoadController
from harness.load.plan import LoadPlan
from harness.scenario import Scenario


def controller(tmp_path: Path) -> LoadController:
    tmp_path.mkdir(parents=True, exist_ok=True)
    sc = Scenario.model_validate({"name": "t", "load": {"concurrency": 1, "duration_s": 5},
                                  "workload": {"classes": [{"name": "a", "input_tokens": 8, "output_tokens": 4}]}})
    plan = LoadPlan(scenario=sc.model_dump(mode="json"), target_url="http://127.0.0.1:9", model="m", out_dir=str(tmp_path))
    return LoadController(plan)


def test_each_environment_holds_its_own_run(tmp_path: Path) -> None:
    a = Environment(user_classes=[user.LLMUser], events=locust.events)
    b = Environment(user_classes=[user.LLMUser], events=locust.events)
    assert user.load_of(a) is None  # no share of a test: its users stop at once
    run_a = user.install(a, controller(tmp_path / "a"))
    run_b = user.install(b, controller(tmp_path / "b"))
    try:
        assert user.load_of(a) is run_a and user.load_of(b) is run_b
        run_a.stop()  # stopping one run leaves the other handing out work
        assert run_a.stopping.is_set() and not run_b.stopping.is_set()
        assert run_b.ctrl.phase == "warmup" and run_a.ctrl.phase != "warmup"
    finally:
        run_a.close()
        run_b.close()


def test_a_new_run_replaces_the_previous_one(tmp_path: Path) -> None:
    env = Environment(user_classes=[user.LLMUser], events=locust.events)
    first = user.install(env, controller(tmp_path / "1"))
    second = user.install(env, controller(tmp_path / "2"))
    try:
        assert user.load_of(env) is second
        gevent.sleep(0)  # the kill lands at the next turn of the loop
        assert first.finisher.greenlet.dead and first.prefetcher.dead  # the old run's greenlets ended
        assert not second.finisher.greenlet.dead
    finally:
        second.close()
