"""Golden files: recorded result directories load into the typed models and write back byte for
byte (the current schema_version's output is unchanged by the models).

tests/results/golden/ holds small directories recorded by tests/results/golden/make.py on the
simulated engine (a closed, open-loop, offline, multi-turn, fleet and LoRA run, a sweep with load
levels and a capacity search per config, a tune, a capacity search, a startup study); the
committed GPU examples (results/examples) are version-1 directories written by earlier harness
versions, so they must load and write back unchanged too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import UserError
from harness.results.models import FILES, RunSummary
from harness.results.models.capacity import CapacitySearch, SweepCapacity
from harness.results.models.startup import StartupDoc
from harness.results.models.sweep import SweepIndex
from harness.results.models.tune import TuneDoc
from harness.results.read import load_capacity, load_dir, load_run, read_file

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "results" / "golden"
RECORDED = sorted(
    p for base in (GOLDEN, ROOT / "results" / "examples") for p in base.rglob("*.json") if p.name in FILES
)


def _id(p: Path) -> str:
    return str(p.relative_to(ROOT))


def test_every_kind_is_recorded() -> None:
    names = {p.name for p in RECORDED if p.is_relative_to(GOLDEN)}
    assert names == set(FILES)
    assert len(RECORDED) > 50  # the examples are there too


@pytest.mark.parametrize("path", RECORDED, ids=_id)
def test_loads_and_writes_back_byte_for_byte(path: Path) -> None:
    model = read_file(path)
    assert FILES[path.name].dumps(model) == path.read_text()


def test_directories_load_as_their_kind() -> None:
    assert isinstance(load_dir(GOLDEN / "run-fleet").model, RunSummary)
    assert load_dir(GOLDEN / "tune").kind == "tune" and isinstance(load_dir(GOLDEN / "tune").model, TuneDoc)
    assert isinstance(load_dir(GOLDEN / "sweep").model, SweepIndex)
    assert isinstance(load_dir(GOLDEN / "startup").model, StartupDoc)
    assert isinstance(load_capacity(GOLDEN / "capacity"), CapacitySearch)
    assert isinstance(load_capacity(GOLDEN / "sweep"), SweepCapacity)


def test_typed_reads_of_the_blocks_that_were_dicts() -> None:
    """The blocks readers used to reach with .get(...) chains and getattr are attributes now."""
    fleet = load_run(GOLDEN / "run-fleet")
    assert fleet.fleet is not None and len(fleet.fleet.endpoints) == 2 and sum(fleet.fleet.sent) > 0
    assert fleet.groups is not None and set(fleet.groups) >= {"endpoint"}
    sessions = load_run(GOLDEN / "run-sessions")
    assert sessions.sessions is not None and sessions.sessions.turns > 0
    run = load_run(GOLDEN / "run-closed")
    assert run.engine.kv_usage.max is not None and run.engine.telemetry.source == "direct"
    assert run.window.duration_s > 0 and run.validity.ok in (True, False)
    assert load_run(GOLDEN / "run-offline").load.offline is not None
    assert load_run(GOLDEN / "run-open").load.rate == 6.0


def _write(tmp: Path, name: str, text: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / name).write_text(text)
    return tmp


def test_newer_and_older_versions_fail_with_one_line(tmp_path: Path) -> None:
    text = (GOLDEN / "run-closed" / "summary.json").read_text()
    newer = _write(tmp_path / "newer", "summary.json", text.replace('"schema_version": 1', '"schema_version": 2', 1))
    with pytest.raises(UserError) as exc:
        load_run(newer)
    assert exc.value.lines == [
        f"{newer / 'summary.json'}: schema_version 2 is newer than this harness reads (1); "
        "upgrade the harness to read it"
    ]
    older = _write(tmp_path / "older", "summary.json", text.replace('"schema_version": 1', '"schema_version": 0', 1))
    with pytest.raises(UserError) as exc:
        load_run(older)
    assert len(exc.value.lines) == 1 and "schema_version 0 is older than this harness reads (1)" in exc.value.lines[0]


def test_unknown_key_and_broken_json_name_the_file_and_field(tmp_path: Path) -> None:
    text = (GOLDEN / "run-closed" / "summary.json").read_text()
    bad = _write(
        tmp_path / "extra", "summary.json", text.replace('"kv_usage": {', '"kv_usge_max": 1, "kv_usage": {', 1)
    )
    with pytest.raises(UserError) as exc:
        load_run(bad)
    assert exc.value.lines == [
        f"{bad / 'summary.json'}: engine.kv_usge_max: a key this harness does not know: "
        "a newer harness wrote it, or the file was edited"
    ]
    cut = _write(tmp_path / "cut", "summary.json", text[: len(text) // 2])
    with pytest.raises(UserError, match="not valid JSON"):
        load_run(cut)
    with pytest.raises(UserError, match="no such file"):
        load_run(tmp_path / "nothing")
