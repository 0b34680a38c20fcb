"""The fast suite's long files start first (tests/suite_order.py START_FIRST): every entry names a
test file of this tree once, so a renamed or removed file is not silently dropped from the list."""

from __future__ import annotations

from pathlib import Path

from suite_order import START_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_every_start_first_entry_is_a_test_file_once() -> None:
    assert len(set(START_FIRST)) == len(START_FIRST)
    for path in START_FIRST:
        assert Path(path).name.startswith("test_") and (ROOT / path).is_file(), path


def test_the_long_files_come_first_in_the_collection(request) -> None:
    files = list(dict.fromkeys(item.nodeid.split("::", 1)[0] for item in request.session.items))
    chosen = [f for f in files if f in START_FIRST]  # those the run selected (-m, -k, a path)
    assert files[: len(chosen)] == [f for f in START_FIRST if f in chosen]
