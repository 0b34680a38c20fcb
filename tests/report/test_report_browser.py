"""report.html in a real headless Chromium: the page is never wider than the window (audit D12:
the sweep report's cells table was wider than the page, so the whole page scrolled sideways)."""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import MARKS, headless_chromium

from harness.report import write_report

pytestmark = MARKS


@pytest.fixture
def browser():
    yield from headless_chromium(1024, 900)


def test_sweep_report_page_is_not_wider_than_the_window(tmp_path: Path, browser) -> None:
    """Config and scenario names as real sweeps have them: the cells table's cell ids and run
    directories are long words that made the table (and so the page) wider than the window."""
    from .fabricate import make_sweep

    sweep = make_sweep(
        tmp_path / "sw",
        configs={"vllm-max-num-seqs-128-chunked-prefill-on": 1.25, "vllm-max-num-seqs-64-chunked-prefill-off": 1.0},
        scenarios=("long_prompt_short_output", "short_prompt_long_output"),
        failed_config=None,
        n=40,
    )
    out = tmp_path / "out"
    write_report(sweep, out)
    browser.get((out / "report.html").as_uri())
    page = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert page[0] <= page[1], f"the page is {page[0]} px wide in a {page[1]} px window"
    # every table sits in a box that scrolls on its own if it still cannot fit: nothing is cut off
    boxes = browser.execute_script(
        "return [...document.querySelectorAll('table')].map(t => [t.parentElement.className, "
        "getComputedStyle(t.parentElement).overflowX, t.getBoundingClientRect().width, t.parentElement.scrollWidth])"
    )
    assert len(boxes) >= 3 and all(cls == "tablewrap" and ov == "auto" for cls, ov, *_ in boxes), boxes
    assert all(sw >= int(width) for _c, _o, width, sw in boxes)
