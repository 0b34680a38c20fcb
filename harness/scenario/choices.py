"""Choices of scenario fields that follow a registry one layer up: `load.arrival` (the arrival
patterns, harness.workload.arrivals) and `target.api` (the API adapters, harness.client.adapters).

The scenario is the bottom layer and those modules import it, so the choices are read from the
registries' folders (one module per name), never imported: a new arrival pattern or API adapter
is one file there, and the scenario's `Literal` (and so its one-line error listing the choices)
follows. tests/scenario/test_choices.py checks that each list equals its registry.
"""

from __future__ import annotations

import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING, Literal

_HARNESS = Path(__file__).resolve().parents[1]


def module_names(folder: str, first: tuple[str, ...], *, dashes: bool = False) -> tuple[str, ...]:
    """The module names in `harness/<folder>` (not `base`, not `_private`), `_` read as `-` with
    `dashes` (an API is named openai-chat, its module openai_chat); `first` in its documented
    order, any others after it, sorted."""
    found = {
        m.name.replace("_", "-") if dashes else m.name
        for m in pkgutil.iter_modules([str(_HARNESS / folder)])
        if m.name != "base" and not m.name.startswith("_")
    }
    return tuple(n for n in first if n in found) + tuple(sorted(found - set(first)))


ARRIVAL_NAMES = module_names("workload/arrivals", ("poisson", "gamma", "constant", "trace"))
API_NAMES = module_names("client/adapters", ("openai-chat", "openai-completions"), dashes=True)

if TYPE_CHECKING:
    # the members are known only at import (the folders' modules): to a type checker, a name
    ArrivalName = str
    ApiName = str
else:
    ArrivalName = Literal[ARRIVAL_NAMES]
    ApiName = Literal[API_NAMES]
