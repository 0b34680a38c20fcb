"""The scenario's `load.arrival` and `target.api` choices follow the registries (one file each)."""

from __future__ import annotations

import typing

import pytest

from harness.client.adapters.base import ADAPTERS, register_all
from harness.errors import UserError
from harness.scenario.choices import ApiName, ArrivalName
from harness.scenario.loader import validate
from harness.scenario.models import Scenario
from harness.workload.arrivals import arrival_names


def test_arrival_choices_are_the_registered_patterns() -> None:
    assert sorted(typing.get_args(ArrivalName)) == arrival_names()
    assert typing.get_args(ArrivalName)[:4] == ("poisson", "gamma", "constant", "trace")  # the documented order


def test_api_choices_are_the_registered_adapters() -> None:
    register_all()
    assert sorted(typing.get_args(ApiName)) == ADAPTERS.names()


@pytest.mark.parametrize(
    "section, field, bad, choices",
    [
        ("load", "arrival", "bursty", ArrivalName),
        ("target", "api", "grpc", ApiName),
    ],
)
def test_a_bad_choice_is_one_line_naming_the_field_and_every_choice(section, field, bad, choices) -> None:
    data = {
        "name": "t",
        "load": {"rate": 1, "requests": 1},
        "workload": {"classes": [{"name": "c", "input_tokens": 1, "output_tokens": 1}]},
    }
    data.setdefault(section, {})[field] = bad
    with pytest.raises(UserError) as exc:
        validate(Scenario, data, "s.yaml")
    (line,) = exc.value.lines
    assert line.startswith(f"s.yaml: {section}.{field}: must be ")
    assert all(repr(c) in line for c in typing.get_args(choices))
