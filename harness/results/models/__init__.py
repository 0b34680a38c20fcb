"""The typed results contract: one pydantic model per file the harness writes and reads back.

    summary.json   RunSummary      (harness.results.models.summary)
    index.json     SweepIndex      (harness.results.models.sweep)
    tune.json      TuneDoc         (harness.results.models.tune)
    cost.json      TuneCost        (harness.results.models.tune)
    capacity.json  CapacitySearch, or SweepCapacity in a sweep directory (harness.results.models.capacity)
    startup.json   StartupDoc      (harness.results.models.startup)

`FILES` says how each is written (its JSON indent), so that reading a file and writing the model
back gives the same bytes (tests/results/test_golden.py). How the models keep the files' keys
and order: harness.results.models.base.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import BaseModel

from harness.results.models.base import Block, Num, Omit, Record
from harness.results.models.capacity import CapacitySearch, SweepCapacity
from harness.results.models.diagnosis import Finding
from harness.results.models.startup import StartupDoc
from harness.results.models.summary import SCHEMA_VERSION, ClassBlock, Dist, GroupBlock, RunSummary
from harness.results.models.sweep import SweepIndex
from harness.results.models.tune import TuneCost, TuneDoc


@dataclass(frozen=True)
class FileKind:
    """One results file: its name, its model, and how its writer formats it."""

    name: str
    model: type[BaseModel]
    indent: int = 2

    def dumps(self, model: BaseModel) -> str:
        """The file's text, as its writer writes it."""
        return dumps(model, self.indent)


def dumps(model: BaseModel, indent: int = 2) -> str:
    """A model as the harness writes its files: json.dumps of the JSON-mode dump, one trailing newline."""
    return json.dumps(model.model_dump(mode="json"), indent=indent, default=str) + "\n"


FILES: dict[str, FileKind] = {
    "summary.json": FileKind("summary.json", RunSummary),
    "index.json": FileKind("index.json", SweepIndex),
    "tune.json": FileKind("tune.json", TuneDoc),
    "cost.json": FileKind("cost.json", TuneCost),
    "capacity.json": FileKind("capacity.json", CapacitySearch),
    "startup.json": FileKind("startup.json", StartupDoc, indent=1),
}

__all__ = [
    "FILES",
    "SCHEMA_VERSION",
    "Block",
    "CapacitySearch",
    "ClassBlock",
    "Dist",
    "FileKind",
    "Finding",
    "GroupBlock",
    "Num",
    "Omit",
    "Record",
    "RunSummary",
    "StartupDoc",
    "SweepCapacity",
    "SweepIndex",
    "TuneCost",
    "TuneDoc",
    "dumps",
]
