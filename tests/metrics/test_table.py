"""The metric table (harness/metrics/table.py): each metric's samples from a nanosecond record, and
the consumers that must follow the table (recorder, summary, exporter, console, report, sweep).

Adding a metric = one entry in the table + one case in EXPECTED below.
"""

from __future__ import annotations

import pytest

from harness.metrics import exporter
from harness.metrics.record import RequestRecord
from harness.metrics.recorder import ALL, MetricSet
from harness.metrics.table import BY_NAME, LIVE, METRICS, derive, shown

MS = 1_000_000


def _record(**kw) -> RequestRecord:
    """Intended at 100 ms, sent at 103 ms; content chunks at 150, 160, 190 ms (1, 1, 3 tokens); the
    server says it queued the request 20 ms and prefilled it in 25 ms."""
    base = dict(
        index=0,
        class_name="c",
        intended_ns=100 * MS,
        sent_ns=103 * MS,
        chunk_ns=[150 * MS, 160 * MS, 190 * MS],
        chunk_tokens=[1, 1, 3],
        output_tokens=5,
        server_timing="vllm",
        server_queue_ns=20 * MS,
        server_prefill_ns=25 * MS,
    )
    return RequestRecord(**{**base, **kw})


EXPECTED = {
    "ttft": 50 * MS,  # first content chunk - intended send (open loop)
    "e2e": 90 * MS,  # last content chunk - intended send
    "tpot": 10 * MS,  # (190 - 150) / (5 - 1), a float rounded to ns
    "send_lag": 3 * MS,
    "itl_chunk": [10 * MS, 30 * MS],
    "itl_token": [10 * MS, 10 * MS, 10 * MS, 10 * MS],  # the 3-token chunk: 3 samples of 30/3
    "tokens_per_chunk": [1, 1, 3],
    "ttft_queue": 20 * MS,
    "ttft_prefill": 25 * MS,
    "ttft_network": 2 * MS,  # TTFT 50 - send lag 3 - queue 20 - prefill 25: the rest
}


def test_every_metric_has_a_case() -> None:
    assert set(EXPECTED) == set(BY_NAME)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_samples_of_one_record(name: str) -> None:
    assert BY_NAME[name].sample(derive(_record())) == EXPECTED[name]


def test_closed_loop_and_short_answers() -> None:
    d = derive(_record(intended_ns=None, output_tokens=1, chunk_ns=[150 * MS], chunk_tokens=[1]))
    assert BY_NAME["ttft"].sample(d) == 47 * MS  # from the actual send
    assert BY_NAME["send_lag"].sample(d) is None
    assert BY_NAME["tpot"].sample(d) is None  # one token: no TPOT
    assert BY_NAME["itl_token"].sample(d) == []
    assert BY_NAME["ttft_network"].sample(d) == 2 * MS  # closed loop: no send lag in TTFT (47 - 20 - 25)


def test_ttft_parts_need_the_servers_timing() -> None:
    d = derive(_record(server_timing=None, server_queue_ns=None, server_prefill_ns=None))
    assert [BY_NAME[m].sample(d) for m in ("ttft_queue", "ttft_prefill", "ttft_network")] == [None] * 3
    d = derive(_record(server_timing="llama.cpp", server_queue_ns=None))  # no queue time: no network part
    assert BY_NAME["ttft_prefill"].sample(d) == 25 * MS and BY_NAME["ttft_network"].sample(d) is None
    # a negative rest (the server's stamps do not fit the client's TTFT) is clamped in the histogram
    assert BY_NAME["ttft_network"].sample(derive(_record(server_prefill_ns=40 * MS))) == 0


def test_tpot_is_not_integer_divided() -> None:
    """The exporter used `//` where the record used floats; both now read the table's value."""
    rec = _record(chunk_ns=[150 * MS, 150 * MS + 7], chunk_tokens=[1, 1], output_tokens=4)  # 7 ns / 3
    assert derive(rec).tpot == pytest.approx(7 / 3)
    assert BY_NAME["tpot"].sample(derive(rec)) == 2  # rounded, as the HDR histogram stores it


def test_recorder_and_summary_follow_the_table() -> None:
    ms = MetricSet()
    ms.record(_record())
    cm = ms.classes[ALL]
    assert list(cm.hist) == [m.name for m in METRICS]
    for name, want in EXPECTED.items():
        h = cm.hist[name]
        values = want if isinstance(want, list) else [want]
        assert h.count == len(values), name
        assert h.sum == sum(values), name
    summary = cm.summarize(1.0)
    assert list(summary["latency_ms"]) == [m.name for m in METRICS if m.unit == "ms"]
    assert summary["latency_ms"]["ttft"]["mean"] == pytest.approx(50.0)


def test_exporter_histograms_are_the_tables_live_entries() -> None:
    assert list(exporter.HISTOGRAMS) == [m.live.name for m in LIVE if m.live]
    lm = exporter.LoadMetrics()
    lm.observe(_record())
    acc = lm._acc["c"]
    for m in LIVE:
        want = EXPECTED[m.name]
        values = want if isinstance(want, list) else [want]
        assert sum(acc.counts[m.live.name]) == len(values), m.name
        assert acc.sums[m.live.name] == sum(values), m.name


def test_report_sweep_and_ui_read_the_table() -> None:
    from harness.compare.metrics import METRICS as COMPARE
    from harness.sweep.results import METRIC_COLUMNS
    from harness.ui.routes import LLM_TABLE

    for m in shown("compare"):
        assert f"{m.short}.p99" in COMPARE and COMPARE[f"{m.short}.p99"].record_field == m.record_field
    for m in shown("sweep"):
        assert f"{m.short}_p99_ms" in METRIC_COLUMNS
    keys = [c["key"] for c in LLM_TABLE]
    for m in shown("ui_table"):
        assert f"{m.short}_p50" in keys
