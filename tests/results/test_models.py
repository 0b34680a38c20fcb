"""The results models against the code that writes the files: a key a writer adds that the model
does not declare would fail at the writer (extra="forbid"); these catch it before a run does."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, get_args

import pytest

from harness.engines import get_kind, kind_names
from harness.results.models import Block, Omit, Record, RunSummary
from harness.results.models.facts import StartupFacts, number
from harness.results.models.sweep import CellMetricName, CellMetrics

GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.mark.parametrize("kind", kind_names())
def test_every_fact_an_engine_kind_reads_is_a_field(kind: str) -> None:
    keys = {k for fact in get_kind(kind).facts for k in fact.keys if k}
    assert keys <= set(StartupFacts.model_fields), sorted(keys - set(StartupFacts.model_fields))


def test_cell_metric_names_are_the_fields() -> None:
    assert list(get_args(CellMetricName)) == list(CellMetrics.model_fields)


def test_omit_fields_are_written_only_when_set() -> None:
    class B(Block):
        always: int = 0
        sometimes: Annotated[int | None, Omit] = None

    assert B().model_dump() == {"always": 0}
    assert B(sometimes=None).model_dump() == {"always": 0, "sometimes": None}
    b = B()
    b.sometimes = 3
    assert b.model_dump() == {"always": 0, "sometimes": 3}


def test_records_keep_the_order_keys_were_set_and_refuse_unknown_keys() -> None:
    class R(Record):
        a: int = 0
        b: int = 0
        c: int = 0

    r = R.model_validate({"c": 1, "a": 2})
    r.b = 3
    assert list(r.model_dump()) == ["c", "a", "b"]
    with pytest.raises(ValueError, match="Extra inputs"):
        R.model_validate({"d": 1})


def test_numbers_keep_int_or_float_and_non_finite_is_null() -> None:
    facts = StartupFacts.model_validate({"graph_capture_s": 0, "max_concurrency": 114.04, "kv_cache_tokens": "n/a"})
    assert facts.model_dump(mode="json") == {"graph_capture_s": 0, "max_concurrency": 114.04, "kv_cache_tokens": "n/a"}
    assert number(facts.kv_cache_tokens) is None and number(facts.graph_capture_s) == 0.0
    s = RunSummary()
    s.requests.rps = float("nan")
    assert s.model_dump(mode="json")["requests"]["rps"] is None


def test_assignment_is_validated_into_blocks() -> None:
    s = RunSummary()
    s.fleet = {"endpoints": ["a", "b"], "routing": "round-robin", "sent": [1, 2]}
    assert s.fleet is not None and s.fleet.sent == [1, 2]
    with pytest.raises(ValueError):
        s.fleet = {"endpoint": "a"}
