"""The web UI's live charts follow the metric table (harness/metrics/table.py, place "chart"): the
view lists them (key, label, unit), the live stats keep a p50/p99 series for each, and the page
(harness/ui/assets/llm.js) draws one chart per listed metric; it names none itself.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.metrics import table
from harness.metrics.record import RequestRecord
from harness.metrics.recorder import MetricSet
from harness.ui.live import LiveStats, chart_specs
from harness.ui.view import build_view

MS = 1_000_000
ASSETS = Path(__file__).resolve().parents[2] / "harness" / "ui" / "assets"


def _delta() -> dict:
    """One request: TTFT 50 ms, 4 ITL samples of 10 ms, TPOT 10 ms (as in tests/metrics/test_table.py)."""
    ms = MetricSet()
    ms.record(
        RequestRecord(
            index=0,
            class_name="c",
            intended_ns=100 * MS,
            sent_ns=103 * MS,
            chunk_ns=[150 * MS, 160 * MS, 190 * MS],
            chunk_tokens=[1, 1, 3],
            output_tokens=5,
        )
    )
    return ms.to_dict(with_all=False)  # what a load process sends (harness.load.messages)


def _idle_session() -> SimpleNamespace:
    return SimpleNamespace(
        base_path=lambda: "",
        run=None,
        state="idle",
        error=None,
        opts=SimpleNamespace(scenario=""),
        choices=SimpleNamespace(names=lambda: []),
        sim=None,
        env=SimpleNamespace(runner=None, host="http://127.0.0.1:1"),
    )


def test_the_table_charts_ttft_and_itl() -> None:
    assert chart_specs() == [
        {"key": "ttft", "label": "TTFT", "unit": "ms"},
        {"key": "itl", "label": "ITL", "unit": "ms/token"},
    ]
    view = build_view(_idle_session())  # also before any run: the page builds its parts once
    assert view["charts"] == chart_specs()
    assert [m["key"] for m in view["metrics"]] == ["ttft", "itl", "tpot"]  # cards and class columns


def test_a_metric_added_to_the_chart_set_reaches_the_ui(monkeypatch: pytest.MonkeyPatch) -> None:
    tpot = table.BY_NAME["tpot"]
    charted = dataclasses.replace(tpot, places=tpot.places | {"chart"})
    monkeypatch.setattr(table, "METRICS", tuple(charted if m.name == "tpot" else m for m in table.METRICS))

    assert [c["key"] for c in build_view(_idle_session())["charts"]] == ["ttft", "itl", "tpot"]
    live = LiveStats()
    live.add(_delta())
    live.sample({}, users=1)
    s = live.series
    assert s["ttft_p50"] == [pytest.approx(50.0, rel=1e-3)]
    assert s["itl_p99"] == [pytest.approx(10.0, rel=1e-3)]
    assert s["tpot_p50"] == [pytest.approx(10.0, rel=1e-3)] and s["tpot_p99"] == [pytest.approx(10.0, rel=1e-3)]


def test_the_page_names_no_metric_of_its_own() -> None:
    """Charts, p99 cards and the class table's percentile columns come from the view's `charts`
    and `metrics` lists, so the page hard-codes none of them (E2E in seconds closes the table)."""
    page = (ASSETS / "llm.html").read_text() + (ASSETS / "llm.js").read_text()
    assert not re.search(r"[ck]-(ttft|itl|tpot|e2e)\b", page)
    assert not re.search(r"\.(ttft|itl|tpot)(_p(50|99)|\b)", page)
    assert not re.search(r">(TTFT|ITL|TPOT)\b", page)
