"""Arrival traces: the recorded gaps' shape at the scenario's mean rate, cycling; one-line errors;
the trace's content in the fingerprint."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from harness.errors import UserError
from harness.scenario import Scenario
from harness.scenario.loader import validate
from harness.workload.arrivals.trace import load_gaps
from harness.workload.fingerprint import fingerprint
from harness.workload.schedule import arrival_offsets, worker_share

STAMPS_MS = [1000, 1000, 1003, 1500, 3000, 3001, 3002, 7000]  # bursts and lulls, 7 gaps over 6 s


def _scenario(rate: float, trace: dict) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "t",
            "seed": 1,
            "load": {"rate": rate, "arrival": "trace", "trace": trace, "requests": 100},
            "workload": {"classes": [{"name": "c", "input_tokens": 10, "output_tokens": 5}]},
        }
    )


def _write(tmp_path: Path, lines: list[str], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_gaps_keep_their_shape_at_the_scenario_rate(tmp_path):
    # shuffled on purpose: logs are not always in order
    _write(tmp_path, [json.dumps({"ts": s, "other": 1}) for s in reversed(STAMPS_MS)])
    sc = _scenario(7.0, {"path": "t.jsonl", "field": "ts", "unit": "ms"})
    gaps = load_gaps(sc.load.trace, tmp_path)
    assert np.allclose(gaps, [0, 0.003, 0.497, 1.5, 0.001, 0.001, 3.998])
    offsets = list(itertools.islice(arrival_offsets(sc.load, sc.seed, tmp_path), 15))
    # the trace's own rate is 7 gaps / 6 s; at 7 req/s every gap is 6x shorter, same shape
    assert offsets[0] == 0 and np.allclose(np.diff(offsets[:8]), gaps / 6)
    assert np.isclose(offsets[7], 1.0)  # one full cycle = 7 requests at 7 req/s
    assert np.allclose(np.diff(offsets[7:15]), gaps / 6)  # it cycles
    # workers split the same sequence
    shares = [list(itertools.islice(worker_share(arrival_offsets(sc.load, 1, tmp_path), w, 2), 6)) for w in (0, 1)]
    assert sorted(shares[0] + shares[1]) == list(enumerate(offsets[:12]))


def test_bare_numbers_in_seconds(tmp_path):
    _write(tmp_path, ["# a comment", "0", "0.5", "", "2.0"], name="t.txt")
    sc = _scenario(1.0, {"path": "t.txt"})
    assert np.allclose(load_gaps(sc.load.trace, tmp_path), [0.5, 1.5])


@pytest.mark.parametrize(
    "lines, fragment",
    [
        (['{"timestamp": "noon"}', "1", "2"], "t.jsonl:1: no number in field 'timestamp'"),
        (["true", "1", "2"], "t.jsonl:1: no number"),
        (["5"], "has 1 timestamp(s); a trace needs at least 2"),
        (["5", "5", "5"], "every timestamp in"),
    ],
)
def test_bad_traces_are_one_line_errors(tmp_path, lines, fragment):
    _write(tmp_path, lines)
    sc = _scenario(1.0, {"path": "t.jsonl"})
    with pytest.raises(UserError) as exc:
        load_gaps(sc.load.trace, tmp_path)
    assert any(fragment in line for line in exc.value.lines), exc.value.lines
    with pytest.raises(UserError, match=r"cannot read .*missing\.jsonl"):
        load_gaps(_scenario(1.0, {"path": "missing.jsonl"}).load.trace, tmp_path)


@pytest.mark.parametrize(
    "load, fragment",
    [
        ({"rate": 2, "arrival": "trace", "requests": 5}, "arrival trace needs trace: {path: ...} and a rate"),
        ({"concurrency": 2, "arrival": "trace", "trace": {"path": "t"}, "requests": 5}, "arrival trace needs"),
        ({"rate": 2, "trace": {"path": "t"}, "requests": 5}, "trace is read only with arrival: trace"),
        ({"rate": 2, "arrival": "trace", "trace": {"path": "t", "unit": "h"}, "requests": 5}, "load.trace.unit"),
    ],
)
def test_load_validation(load, fragment):
    data = {"name": "t", "load": load, "workload": {"classes": [{"name": "c", "input_tokens": 1, "output_tokens": 1}]}}
    with pytest.raises(UserError) as exc:
        validate(Scenario, data, "s.yaml")
    assert any(fragment in line for line in exc.value.lines), exc.value.lines


def test_fingerprint_follows_the_trace_content(tmp_path):
    _write(tmp_path, [str(s) for s in STAMPS_MS])
    sc = _scenario(2.0, {"path": "t.jsonl", "unit": "ms"})
    before = fingerprint(sc, base_dir=tmp_path)
    _write(tmp_path, [str(s) for s in STAMPS_MS[:-1]])
    after = fingerprint(sc, base_dir=tmp_path)
    assert (
        before["parts"]["load"] != after["parts"]["load"] and before["parts"]["workload"] == after["parts"]["workload"]
    )
