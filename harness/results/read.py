"""Read any results directory into its typed models: a run, a sweep, a tune, a capacity search or
a startup study. The one place that turns the harness's JSON files back into objects.

    from harness.results.read import load_run, load_dir
    summary = load_run("results/run1")        # RunSummary (summary.json)
    found = load_dir("results/sweeps/s1")     # Found(kind="sweep", model=SweepIndex, path=...)

What goes wrong is one line naming the file and what to do (a UserError: the CLI prints it and
exits 2): no such file, not JSON, a `schema_version` this harness does not read (a directory
written by a newer harness, or by an older one whose meaning changed), or a field the model does
not know (the line names its path). Files without `schema_version` (index.json, capacity.json,
cost.json) are read as the current version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from harness.errors import UserError
from harness.results.models import FILES, SCHEMA_VERSION
from harness.results.models.capacity import CapacitySearch, SweepCapacity
from harness.results.models.startup import StartupDoc
from harness.results.models.summary import RunSummary
from harness.results.models.sweep import SweepIndex
from harness.results.models.tune import TuneCost, TuneDoc

M = TypeVar("M", bound=BaseModel)

#: the versions of each versioned file this harness reads (all written by it are version 1)
READS: dict[str, tuple[int, ...]] = {"summary.json": (SCHEMA_VERSION,), "tune.json": (1,), "startup.json": (1,)}

Kind = Literal["run", "sweep", "tune", "capacity", "startup"]


def _error_line(path: Path, exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    hint = (
        "a key this harness does not know: a newer harness wrote it, or the file was edited"
        if first["type"] == "extra_forbidden"
        else first["msg"]
    )
    return f"{path}: {where}: {hint}{more}"


def read_json_file(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read it ({exc})") from None
    except ValueError as exc:
        raise UserError(f"{path}: not valid JSON ({exc}); the writer may have been interrupted") from None


def check_version(path: Path, data: Any) -> None:
    """One line for a version this harness does not read (newer: upgrade; older: re-run or an older harness)."""
    versions = READS.get(Path(path).name)
    if versions is None or not isinstance(data, dict):
        return
    version = data.get("schema_version")
    if version in versions:
        return
    if not isinstance(version, int):
        raise UserError(f"{path}: no schema_version (got {version!r}); not a {Path(path).name} the harness wrote")
    newest = max(versions)
    if version > newest:
        raise UserError(
            f"{path}: schema_version {version} is newer than this harness reads ({newest}); "
            "upgrade the harness to read it"
        )
    raise UserError(
        f"{path}: schema_version {version} is older than this harness reads "
        f"({', '.join(map(str, versions))}); read it with the harness that wrote it, or run it again"
    )


def parse(path: Path, model: type[M], data: Any) -> M:
    """`data` (a file's JSON) as `model`, or a UserError naming the file and the field."""
    check_version(path, data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(_error_line(Path(path), exc)) from None


def read_model(path: Path | str, model: type[M]) -> M:
    path = Path(path)
    return parse(path, model, read_json_file(path))


def read_file(path: Path | str) -> BaseModel:
    """Any results file by its name; a capacity.json is a search's or a sweep's (one per config)."""
    path = Path(path)
    kind = FILES.get(path.name)
    if kind is None:
        raise UserError(f"{path}: not a results file this harness reads ({', '.join(FILES)})")
    data = read_json_file(path)
    model: type[BaseModel] = kind.model
    if path.name == "capacity.json" and isinstance(data, dict) and "knob" not in data:
        model = SweepCapacity
    return parse(path, model, data)


def _in(path: Path | str, name: str) -> Path:
    p = Path(path)
    return p if p.name == name else p / name


def load_run(path: Path | str) -> RunSummary:
    """summary.json of a run directory (or the file itself)."""
    return read_model(_in(path, "summary.json"), RunSummary)


def load_sweep(path: Path | str) -> SweepIndex:
    return read_model(_in(path, "index.json"), SweepIndex)


def load_tune(path: Path | str) -> TuneDoc:
    return read_model(_in(path, "tune.json"), TuneDoc)


def load_cost(path: Path | str) -> TuneCost:
    return read_model(_in(path, "cost.json"), TuneCost)


def load_capacity(path: Path | str) -> CapacitySearch | SweepCapacity:
    """A capacity search's capacity.json, or a sweep's (`--capacity-search`: per config)."""
    found = read_file(_in(path, "capacity.json"))
    assert isinstance(found, (CapacitySearch, SweepCapacity))
    return found


def load_startup(path: Path | str) -> StartupDoc:
    return read_model(_in(path, "startup.json"), StartupDoc)


@dataclass(frozen=True)
class Found:
    kind: Kind
    path: Path  # the file read
    model: BaseModel


#: what makes a directory each kind, most specific first (a tune's steps are sweeps; a startup has
#: a steady/ sweep; a sweep may hold a capacity.json of its own)
_MARKERS: tuple[tuple[Kind, str], ...] = (
    ("tune", "tune.json"),
    ("startup", "startup.json"),
    ("sweep", "index.json"),
    ("capacity", "capacity.json"),
    ("run", "summary.json"),
)


def load_dir(path: Path | str) -> Found:
    """Whatever results directory `path` is, read into its model."""
    root = Path(path)
    if root.is_file():
        return Found(_kind_of(root.name), root, read_file(root))
    for kind, name in _MARKERS:
        if (root / name).is_file():
            return Found(kind, root / name, read_file(root / name))
    if not root.exists():
        raise UserError(f"{root}: no such directory")
    raise UserError(f"{root}: not a results directory (none of {', '.join(n for _, n in _MARKERS)})")


def _kind_of(name: str) -> Kind:
    for kind, marker in (*_MARKERS, ("tune", "cost.json")):
        if marker == name:
            return kind
    raise UserError(f"{name}: not a results file this harness reads ({', '.join(FILES)})")
