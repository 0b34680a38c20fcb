"""Metric definitions on hand-made timelines, goodput/SLO logic, MetricSet merge across workers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.metrics.record import RequestRecord, meets_slo
from harness.metrics.recorder import ALL, MetricSet
from harness.scenario import Scenario

MS = 1_000_000


def rec(
    chunks_ms: list[float],
    tokens: list[int],
    out: int | None = None,
    sent_ms: float = 0.0,
    intended_ms: float | None = None,
    cls: str = "c",
    error: str | None = None,
    inp: int | None = 10,
) -> RequestRecord:
    r = RequestRecord(
        index=0,
        class_name=cls,
        sent_ns=int(sent_ms * MS),
        intended_ns=None if intended_ms is None else int(intended_ms * MS),
    )
    r.chunk_ns = [int(c * MS) for c in chunks_ms]
    r.chunk_tokens = tokens
    r.output_tokens = sum(tokens) if out is None else out
    r.input_tokens = inp
    r.intended_input_tokens = 12
    r.error_kind = error
    return r


def hist_values(ms: MetricSet, name: str, cls: str = ALL) -> list[tuple[int, int]]:
    return ms.classes[cls].hist[name].values()


# ---------------------------------------------------------------- one request
def test_closed_loop_definitions() -> None:
    r = rec([100, 110, 140, 142], [1, 1, 3, 2], sent_ms=0)
    assert r.ttft_ns == 100 * MS
    assert r.e2e_ns == 142 * MS
    assert r.tpot_ns == pytest.approx((142 - 100) * MS / (7 - 1))  # (E2E - TTFT) / (N - 1)
    assert r.send_lag_ns is None


def test_open_loop_counts_from_the_intended_time() -> None:
    r = rec([100, 120], [1, 1], sent_ms=30, intended_ms=10)
    assert r.start_ns == 10 * MS
    assert r.ttft_ns == 90 * MS and r.e2e_ns == 110 * MS
    assert r.send_lag_ns == 20 * MS


def test_tpot_undefined_for_one_token_and_no_chunks() -> None:
    assert rec([50], [1]).tpot_ns is None
    assert rec([], [], out=0).ttft_ns is None and rec([], [], out=0).tpot_ns is None
    # one chunk holding 4 tokens: all tokens arrived at once, TPOT 0
    assert rec([50], [4]).tpot_ns == 0


def test_per_chunk_and_per_token_samples() -> None:
    ms = MetricSet()
    ms.record(rec([100, 110, 140, 142], [1, 1, 3, 2], sent_ms=0))
    assert _close(hist_values(ms, "itl_chunk"), {2 * MS: 1, 10 * MS: 1, 30 * MS: 1})
    # a chunk of k tokens gives k samples of gap/k: 10 ms x1, 30/3 = 10 ms x3, 2/2 = 1 ms x2
    assert _close(hist_values(ms, "itl_token"), {1 * MS: 2, 10 * MS: 4})
    tpc = ms.classes[ALL].hist["tokens_per_chunk"]
    assert tpc.values() == [(1, 2), (2, 1), (3, 1)]
    s = ms.classes[ALL].summarize(1.0)
    lat = s["latency_ms"]
    assert lat["itl_token"]["count"] == 6 and lat["itl_token"]["mean"] == pytest.approx(42 / 6)
    assert lat["itl_chunk"]["count"] == 3 and lat["itl_chunk"]["mean"] == pytest.approx(14.0)
    assert lat["tpot"]["mean"] == pytest.approx(7.0)  # 42 ms over 6 gaps
    assert lat["ttft"]["mean"] == 100.0 and lat["e2e"]["mean"] == 142.0
    assert (lat["ttft"]["count"], lat["e2e"]["count"], lat["send_lag"]["count"]) == (1, 1, 0)
    assert s["tokens_per_chunk"]["mean"] == pytest.approx(7 / 4)
    assert s["tokens"]["output_total"] == 7 and s["tokens"]["input_total"] == 10


def _close(values: list[tuple[int, int]], expected: dict[int, int]) -> bool:
    """HDR buckets report a bucket's highest equivalent value (3 significant digits)."""
    got: dict[int, int] = {}
    for v, n in values:
        key = next(e for e in expected if abs(v - e) <= e * 1e-3)
        got[key] = got.get(key, 0) + n
    return got == expected


def test_failed_requests_count_but_add_no_latency() -> None:
    ms = MetricSet()
    ms.record(rec([100, 110], [1, 1]))
    ms.record(rec([5], [1], error="disconnect"))
    ms.record(rec([], [], out=0, error="http_429"))
    s = ms.classes[ALL].summarize(2.0)
    assert s["requests"] == {
        "completed": 1,
        "failed": 2,
        "errors_by_kind": {"disconnect": 1, "http_429": 1},
        "rps": 0.5,
    }
    assert s["latency_ms"]["ttft"]["count"] == 1 and s["latency_ms"]["itl_chunk"]["count"] == 1
    assert s["tokens"]["output_total"] == 2 and s["tokens"]["output_per_s"] == 1.0
    assert s["goodput"]["total"] == 3 and s["goodput"]["good"] == 1


def test_input_tokens_fall_back_to_intended() -> None:
    ms = MetricSet()
    ms.record(rec([1], [1], inp=None))
    assert ms.classes[ALL].counts["input_tokens"] == 12


# ---------------------------------------------------------------- SLOs and goodput
def test_meets_slo() -> None:
    r = rec([100, 110, 120], [1, 1, 1])  # TTFT 100, TPOT 10, E2E 120
    assert meets_slo(r, {})
    assert meets_slo(r, {"ttft_ms": 100, "tpot_ms": 10, "e2e_ms": 120})  # limits are inclusive
    assert not meets_slo(r, {"ttft_ms": 99.9})
    assert not meets_slo(r, {"tpot_ms": 9.9})
    assert not meets_slo(r, {"e2e_ms": 119})
    assert meets_slo(rec([100], [1]), {"tpot_ms": 1})  # one token: no TPOT to violate
    assert not meets_slo(rec([100, 110], [1, 1], error="timeout"), {})
    assert not meets_slo(rec([], [], out=0), {"ttft_ms": 1000})  # no first token: cannot meet TTFT


SCENARIO: dict[str, Any] = {
    "name": "g",
    "load": {"concurrency": 1, "requests": 1},
    "slo": {"ttft_ms": 100, "tpot_ms": 10},
    "workload": {
        "classes": [
            {"name": "chat", "input_tokens": 5, "output_tokens": 5},
            {"name": "doc", "input_tokens": 5, "output_tokens": 5, "slo": {"ttft_ms": 500}},
        ]
    },
}


def _metricset(sc: Scenario) -> MetricSet:
    """As the load controller builds it."""
    slos = {c.name: sc.slo_for(c.name).model_dump() for c in sc.workload.classes}
    slos[ALL] = sc.slo.model_dump()
    return MetricSet(slos)


def test_per_class_slo_override() -> None:
    sc = Scenario.model_validate(SCENARIO)
    assert sc.slo_for("doc").model_dump() == {"ttft_ms": 500, "tpot_ms": 10, "e2e_ms": None}
    assert sc.slo_for("chat").model_dump() == {"ttft_ms": 100, "tpot_ms": 10, "e2e_ms": None}
    ms = _metricset(sc)
    slow_start = [300, 305, 310]  # TTFT 300, TPOT 5
    assert ms.record(rec(slow_start, [1, 1, 1], cls="doc")) is True  # doc allows 500 ms
    assert ms.record(rec(slow_start, [1, 1, 1], cls="chat")) is False
    assert ms.record(rec([50, 80, 110], [1, 1, 1], cls="doc")) is False  # TPOT 30 > inherited 10
    assert ms.record(rec([50, 55], [1, 1], cls="chat")) is True
    overall = ms.classes[ALL].summarize(2.0)["goodput"]
    assert overall == {"good": 2, "total": 4, "fraction": 0.5, "rps": 1.0}
    assert ms.classes["doc"].summarize(2.0)["goodput"]["good"] == 1
    assert ms.classes["chat"].summarize(2.0)["goodput"]["fraction"] == 0.5


# ---------------------------------------------------------------- merge across workers
def _records(n: int) -> list[RequestRecord]:
    out = []
    for i in range(n):
        k = 1 + i % 3
        chunks = [20 + i % 17 + j * (3 + i % 5) for j in range(1 + i % 6)]
        r = rec(
            chunks,
            [k] * len(chunks),
            cls=("chat", "doc")[i % 2],
            sent_ms=0,
            intended_ms=None if i % 4 else -float(i % 7),
            error="http_5xx" if i % 11 == 0 else None,
        )
        out.append(r)
    return out


def test_metricset_merge_of_two_workers_equals_one() -> None:
    sc = Scenario.model_validate(SCENARIO)
    whole, w0, w1 = _metricset(sc), _metricset(sc), _metricset(sc)
    for i, r in enumerate(_records(400)):
        whole.record(r)
        (w0 if i % 2 == 0 else w1).record(r)
    merged = MetricSet()
    for w in (w0, w1):
        merged.merge_dict(json.loads(json.dumps(w.to_dict())))  # shipped as JSON like load_result.json
    assert set(merged.classes) == {ALL, "chat", "doc"}
    for name in merged.classes:
        assert merged.classes[name].summarize(3.0) == whole.classes[name].summarize(3.0), name
    direct = MetricSet()
    direct.merge(w0)
    direct.merge(w1)
    assert direct.classes[ALL].summarize(3.0) == whole.classes[ALL].summarize(3.0)
    enc = merged.encoded_histograms()
    assert set(enc[ALL]) == {
        "ttft",
        "itl_chunk",
        "itl_token",
        "tpot",
        "e2e",
        "send_lag",
        "tokens_per_chunk",
        "ttft_queue",
        "ttft_prefill",
        "ttft_network",
    }


def test_a_worker_that_completed_nothing_says_zero_and_merges_as_nothing() -> None:
    """A distributed worker stopped before any request completed (a 3-s test on a loaded box):
    its result says 0 for every core counter, and merging it changes no figure."""
    idle = json.loads(json.dumps(MetricSet().to_dict()))  # shipped as JSON like load_result.wK.json
    assert idle[ALL]["counts"] == {"completed": 0, "failed": 0, "good": 0, "input_tokens": 0, "output_tokens": 0}
    busy = MetricSet()
    busy.record(rec([5, 10], [1, 1]))
    busy.record(rec([], [], error="timeout"))
    merged = MetricSet()
    for part in (idle, json.loads(json.dumps(busy.to_dict()))):
        merged.merge_dict(part)
    assert merged.classes[ALL].summarize(2.0) == busy.classes[ALL].summarize(2.0)
    assert merged.to_dict()[ALL]["counts"]["completed"] == 1


def test_zero_duration_gives_zero_rates() -> None:
    ms = MetricSet()
    ms.record(rec([1], [1]))
    s = ms.classes[ALL].summarize(0.0)
    assert s["requests"]["rps"] == 0.0 and s["tokens"]["output_per_s"] == 0.0


def test_to_json_line() -> None:
    r = rec([100, 110, 140, 142], [1, 1, 3, 2], sent_ms=30, intended_ms=10)
    r.error_detail = "x" * 500
    line = r.to_json()
    assert line["ttft_ms"] == 90.0 and line["e2e_ms"] == 132.0 and line["send_lag_ms"] == 20.0
    assert line["tpot_ms"] == pytest.approx(7.0) and line["chunks"] == 4
    assert line["chunk_offsets_us"] == [90_000, 100_000, 130_000, 132_000]
    assert len(line["error_detail"]) == 300
    json.dumps(line)
