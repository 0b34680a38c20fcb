"""A sweep file's engine `kind` choices follow the engine kind modules (one file per kind)."""

from __future__ import annotations

import typing

from harness.engines import kind_names
from harness.sweep.models import EngineKindName


def test_kind_choices_are_the_registered_engine_kinds() -> None:
    assert list(typing.get_args(EngineKindName)) == kind_names()
