"""A sweep file's engine `kind` choices follow the engine kind modules (one file per kind)."""

from __future__ import annotations

import typing

from harness.sweep.engines import KINDS
from harness.sweep.models import EngineKindName


def test_kind_choices_are_the_registered_engine_kinds() -> None:
    assert sorted(typing.get_args(EngineKindName)) == KINDS.names()
