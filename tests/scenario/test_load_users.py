"""Locust users and spawn rate: defined once on scenario.models.Load, asked by every front end."""

from __future__ import annotations

from typing import Any

import pytest

from harness.load.plan import LoadPlan
from harness.scenario.models import Load, Scenario


def load(**kw: Any) -> Load:
    return Load.model_validate(kw)


def test_closed_loop_users_ramp_over_ramp_s() -> None:
    lo = load(concurrency=12, duration_s=5, ramp_s=4)
    assert lo.users == 12
    assert lo.spawn_rate() == pytest.approx(3.0)
    assert lo.spawn_rate(6) == pytest.approx(1.5)  # a share ramps over the same seconds
    assert lo.ramp_for(3.0) == pytest.approx(4.0)  # -r 3 starts 12 users in 4 s


def test_open_loop_pool_starts_at_once() -> None:
    lo = load(rate=5, duration_s=5, max_in_flight=40, ramp_s=4)
    assert lo.users == 40
    assert lo.spawn_rate() == 40.0  # the arrival schedule paces the requests, not the users


def test_offline_users_are_the_batch() -> None:
    lo = load(offline=True, requests=30)
    assert lo.users == 30
    assert lo.spawn_rate() == 30.0


@pytest.mark.parametrize("users,workers", [(10, 3), (2, 4), (1024, 7)])
def test_shares_cover_every_user(users: int, workers: int) -> None:
    lo = load(concurrency=users, duration_s=5)
    shares = [lo.users_of(k, workers) for k in range(workers)]
    # every process runs at least one user; otherwise the shares add up to the load's users
    assert sum(shares) == max(users, workers)
    assert max(shares) - min(shares) <= 1


def test_a_plan_asks_its_share() -> None:
    sc = Scenario.model_validate(
        {
            "name": "t",
            "load": {"concurrency": 9, "duration_s": 5, "ramp_s": 3},
            "workload": {"classes": [{"name": "a", "input_tokens": 8, "output_tokens": 4}]},
        }
    )
    plan = LoadPlan(
        scenario=sc.model_dump(mode="json"),
        target_url="http://127.0.0.1:9",
        model="m",
        out_dir=".",
        worker=0,
        workers=2,
    )
    assert plan.users() == (5, pytest.approx(5 / 3))
