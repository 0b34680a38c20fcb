"""summary.json assembly: merging load processes' results, and the validity warnings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.metrics.record import RequestRecord
from harness.metrics.recorder import ALL, MetricSet
from harness.results.build import build_summary, merge_load_results
from harness.results.schema import LATENCY_METRICS, RunSummary

MS = 1_000_000


def _rec(
    i: int, cls: str = "a", error: str | None = None, intended_lag_ms: float | None = None, source: str = "usage"
) -> RequestRecord:
    r = RequestRecord(index=i, class_name=cls, sent_ns=10 * MS)
    if intended_lag_ms is not None:
        r.intended_ns = r.sent_ns - int(intended_lag_ms * MS)
    r.chunk_ns = [r.sent_ns + (50 + i + 5 * j) * MS for j in range(4)]
    r.chunk_tokens = [1, 1, 1, 1]
    r.output_tokens, r.input_tokens, r.output_source, r.error_kind = 4, 20, source, error
    return r


def _result(worker: int, recs: list[RequestRecord], start: float, dur: float, **extra: Any) -> dict[str, Any]:
    ms = MetricSet({ALL: {"ttft_ms": 60}})
    for r in recs:
        ms.record(r)
    res = {
        "worker": worker,
        "metrics": json.loads(json.dumps(ms.to_dict())),
        "window": {"start": start, "end": start + dur, "duration_s": dur, "warmup_s": 1.0, "warmup_requests": 2},
        "sent": len(recs),
        "cut_at_end": 0,
        "timing": {"clock_by_request": {"kernel": len(recs)}, "coalesced_reads": 0},
        "usage_check": {
            "requests_with_usage": len(recs),
            "prompt_tokens_mean_diff": 0.0,
            "max_diff": 0,
            "output_tokenizer_disagreements": 0,
            "tokenizer": "builtin-words-v1",
        },
        "client": {"cpu_max_pct": 30.0, "cpu_mean_pct": 20.0},
    }
    for k, v in extra.items():
        res[k] = {**res[k], **v} if isinstance(v, dict) else v
    return res


def _build(results: list[dict[str, Any]], load: dict[str, Any] | None = None, **kw: Any) -> RunSummary:
    summary, _ = build_summary(
        scenario={"name": "s", "fingerprint": {"value": "f"}},
        target={"url": "http://x", "api": "openai-chat", "model": "m"},
        load=load or {"mode": "closed"},
        results=results,
        engine=None,
        stall_meter=None,
        **kw,
    )
    return summary


def test_two_workers_merge() -> None:
    r0 = _result(
        0,
        [_rec(i) for i in range(0, 10, 2)],
        start=100.0,
        dur=10.0,
        usage_check={"prompt_tokens_mean_diff": 2.0, "max_diff": 3, "requests_with_usage": 5},
    )
    r1 = _result(
        1,
        [_rec(i) for i in range(1, 10, 2)] + [_rec(99, error="http_429")],
        start=100.5,
        dur=10.0,
        usage_check={"prompt_tokens_mean_diff": -1.0, "max_diff": 1, "requests_with_usage": 5},
    )
    _metrics, merged = merge_load_results([r0, r1])
    assert merged["window"]["start"] == 100.0 and merged["window"]["end"] == 110.5
    assert merged["window"]["duration_s"] == pytest.approx(10.5)
    s = _build([r0, r1], processes=2)
    assert s.requests.completed == 10 and s.requests.failed == 1
    assert s.requests.errors_by_kind == {"http_429": 1}
    assert s.requests.rps == pytest.approx(10 / 10.5)
    assert s.usage_check.prompt_tokens_mean_diff == pytest.approx(0.5) and s.usage_check.max_diff == 3
    assert s.client.sent == 11 and s.client.warmup_requests == 4 and s.client.processes == 2
    assert s.timing.clock == "kernel" and s.timing.requests_by_clock == {"kernel": 11}
    # the merged histograms are the single-process ones
    whole = MetricSet({ALL: {"ttft_ms": 60}})
    for r in [_rec(i) for i in range(10)] + [_rec(99, error="http_429")]:
        whole.record(r)
    assert s.latency_ms["ttft"].model_dump() == whole.classes[ALL].summarize(10.5)["latency_ms"]["ttft"]
    assert s.goodput.overall.good == 10 - 0 and s.goodput.per_class["a"].total == 11
    assert set(s.latency_ms) == set(LATENCY_METRICS)
    assert s.validity.ok is True and s.validity.warnings == []


def test_summary_round_trips_through_json() -> None:
    s = _build([_result(0, [_rec(i) for i in range(3)], 1.0, 2.0)], status="partial")
    back = RunSummary.model_validate(json.loads(json.dumps(s.model_dump(mode="json"))))
    assert back == s and back.status == "partial"


def test_mixed_clocks_reported_as_user() -> None:
    r = _result(0, [_rec(0)], 1.0, 1.0, timing={"clock_by_request": {"kernel": 3, "user": 1}})
    assert _build([r]).timing.clock == "user"


@pytest.mark.parametrize(
    "case,expected",
    [
        ("nothing", "no request completed in the measured window"),
        ("cpu", "client saturated: a load process reached 95% CPU"),
        ("coalesced", "5 reads held several SSE events (33.3% of chunk gaps)"),
        ("lag", "open-loop sends ran late (send lag p99 25.0 ms)"),
        ("usage", "the server's prompt token counts differ from the intended lengths by +4.0 per request on average"),
        ("tokenizer", "1 request(s) had no usage from the server"),
        ("cut", "3 in-flight request(s) were cut when the run stopped"),
    ],
)
def test_validity_warnings(case: str, expected: str) -> None:
    recs = [_rec(i) for i in range(5)]
    load = {"mode": "closed"}
    extra: dict[str, Any] = {}
    if case == "nothing":
        recs = [_rec(0, error="connect")]
    elif case == "cpu":
        extra["client"] = {"cpu_max_pct": 95.0}
    elif case == "coalesced":
        extra["timing"] = {"coalesced_reads": 5}
    elif case == "lag":
        recs = [_rec(i, intended_lag_ms=25.0) for i in range(5)]
        load = {"mode": "open"}
    elif case == "usage":
        extra["usage_check"] = {"prompt_tokens_mean_diff": 4.0, "max_diff": 9}
    elif case == "tokenizer":
        recs.append(_rec(7, source="tokenizer"))
    elif case == "cut":
        extra["cut_at_end"] = 3
    s = _build([_result(0, recs, 1.0, 5.0, **extra)], load=load)
    assert s.validity.ok is False
    assert any(w.startswith(expected) for w in s.validity.warnings), s.validity.warnings
    assert len(s.validity.warnings) == 1, s.validity.warnings


class _FixedStalls:
    def __init__(self, block: dict) -> None:
        self.block = block
        self.window: tuple | None = None

    def summary(self, window_start, window_end) -> dict:
        self.window = (window_start, window_end)
        return self.block


def test_stalls_in_window_warn() -> None:
    meter = _FixedStalls({"stalls_in_window": 2, "max_stall_ms": 300.0})
    summary, _ = build_summary(
        scenario={},
        target={},
        load={"mode": "closed"},
        results=[_result(0, [_rec(0)], 1.0, 1.0)],
        engine=None,
        stall_meter=meter,
    )
    # the meter is asked about exactly the merged measured window
    assert meter.window == (summary.window.start, summary.window.end) and meter.window[0] is not None
    assert summary.timing.stall_meter.model_dump() == meter.block
    assert summary.validity.warnings == [
        "host stalled 2 time(s) in the window (max 300 ms): tail latencies may include time the machine was not running"
    ]


def test_a_fifth_of_requests_failed_is_a_validity_warning() -> None:
    """Audit High 4: 16-27 % failed requests still gave validity.ok true and no warning."""
    recs = [_rec(i) for i in range(8)] + [_rec(8, error="http_5xx"), _rec(9, error="disconnect")]
    s = _build([_result(0, recs, 1.0, 2.0)])
    assert s.validity.ok is False
    assert any(w.startswith("20% of measured requests failed (disconnect 1, http_5xx 1)") for w in s.validity.warnings)


def test_backoffs_suppressed_lines_and_abort_reason_merge() -> None:
    r0 = _result(0, [_rec(0, error="http_429")], 1.0, 2.0)
    r0.update(
        backoffs=3,
        backoff_s=0.5,
        error_lines_suppressed={"http_429": 7},
        abort_reason="stopped early: the last 50 requests ...",
    )
    r1 = _result(1, [_rec(1)], 1.0, 2.0)
    r1.update(backoffs=2, backoff_s=0.25, error_lines_suppressed={"http_429": 1})
    s = _build([r0, r1], processes=2)
    assert (s.client.backoffs, s.client.backoff_s, s.client.error_lines_suppressed) == (5, 0.75, {"http_429": 8})
    assert s.status == "failed" and s.status_reason.startswith("stopped early")


@pytest.mark.parametrize(
    "engine, expected",
    [
        (
            {"kv_usage": {"max": 1.0}, "preemptions": {"count": 61, "per_s": 2.1}},
            "KV cache reached 100% and 61 request(s) were preempted",
        ),
        ({"kv_usage": {"max": 0.96}, "preemptions": {"count": 0, "per_s": 0.0}}, "KV cache reached 96%:"),
        ({"kv_usage": {"max": 0.4}, "preemptions": {"count": 12, "per_s": 0.5}}, "12 request(s) were preempted"),
    ],
)
def test_kv_full_or_a_preemption_storm_is_a_validity_warning(engine: dict[str, Any], expected: str) -> None:
    """Audit D3: a sweep crowned a config at KV 100 % with 61 preemptions and no word about it."""
    summary, _ = build_summary(
        scenario={"name": "s", "fingerprint": {"value": "f"}},
        target={"url": "http://x", "api": "openai-chat", "model": "m"},
        load={"mode": "closed"},
        results=[_result(0, [_rec(i) for i in range(20)], 100.0, 10.0)],
        engine=engine,
        stall_meter=None,
    )
    assert any(expected in w and "ran out of KV-cache room" in w for w in summary.validity.warnings), summary.validity


def test_a_roomy_kv_cache_is_not_flagged() -> None:
    summary, _ = build_summary(
        scenario={"name": "s", "fingerprint": {"value": "f"}},
        target={"url": "http://x", "api": "openai-chat", "model": "m"},
        load={"mode": "closed"},
        results=[_result(0, [_rec(i) for i in range(20)], 100.0, 10.0)],
        engine={"kv_usage": {"max": 0.3}, "preemptions": {"count": 1, "per_s": 0.1}},
        stall_meter=None,
    )
    assert not any("KV-cache room" in w for w in summary.validity.warnings)


def _sim_block(behind_s: float, modelled_s: float, lag_p99_ms: float, mean_step_ms: float | None) -> dict[str, Any]:
    return {
        "simulator": {
            "behind_s": behind_s,
            "modelled_s": modelled_s,
            "behind_share": behind_s / (behind_s + modelled_s) if behind_s + modelled_s else None,
            "steps": 1000,
            "mean_step_ms": mean_step_ms,
            "step_lag_ms": {"mean": 0.3, "p50": 0.1, "p99": lag_p99_ms, "p99_bucket_ms": [0, 1]},
        }
    }


@pytest.mark.parametrize(
    "engine, expected",
    [
        # audit N6: the 64-user no-spec cell on a busy box, 32 % of its busy time behind
        (_sim_block(1.71, 3.58, 7.6, 2.8), "fell behind its own schedule by 1.71 s (32% of its busy time, limit 5%)"),
        (_sim_block(0.01, 5.0, 12.0, 8.9), "with steps 12.0 ms late at p99 against a 8.9-ms step"),
        (
            _sim_block(0.0, 0.0, 9.0, None),
            "with steps 9.0 ms late at p99 against a 5.0-ms step",
        ),  # scripted: client ITL
    ],
)
def test_a_simulated_engine_behind_its_schedule_invalidates_the_run(engine: dict[str, Any], expected: str) -> None:
    summary, _ = build_summary(
        scenario={"name": "s", "fingerprint": {"value": "f"}},
        target={"url": "http://x", "api": "openai-chat", "model": "m"},
        load={"mode": "closed"},
        results=[_result(0, [_rec(i) for i in range(20)], 100.0, 10.0)],
        engine=engine,
        stall_meter=None,
    )
    hit = [w for w in summary.validity.warnings if w.startswith("the simulated engine fell behind")]
    assert hit and expected in hit[0], summary.validity
    assert summary.validity.ok is False


@pytest.mark.parametrize("engine", [_sim_block(0.03, 5.0, 1.5, 8.9), _sim_block(0.1, 5.0, 4.0, 8.9), {}])
def test_a_simulator_on_schedule_or_a_real_engine_is_not_flagged(engine: dict[str, Any]) -> None:
    summary, _ = build_summary(
        scenario={"name": "s", "fingerprint": {"value": "f"}},
        target={"url": "http://x", "api": "openai-chat", "model": "m"},
        load={"mode": "closed"},
        results=[_result(0, [_rec(i) for i in range(20)], 100.0, 10.0)],
        engine=engine,
        stall_meter=None,
    )
    assert not any("simulated engine" in w for w in summary.validity.warnings)
