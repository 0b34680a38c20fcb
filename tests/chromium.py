"""Debian's headless Chromium for the tests that look at pages in a real browser (the web UI, the
HTML report): the skip marks and one driver factory, so each browser test says only its window."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (.ci/run installs it)"),
    # chromium without its driver (Debian ships them as two packages) must skip, not error in the fixture
    pytest.mark.skipif(
        not CHROMEDRIVER.exists(), reason="Debian's chromium-driver is not installed (.ci/run installs it)"
    ),
]


def headless_chromium(width: int, height: int) -> Iterator[Any]:
    """A fixture body: yields a selenium driver with a window of width x height, then quits it."""
    pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[test]')")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--window-size={width},{height}",
        f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}",
    ):
        opts.add_argument(arg)
    opts.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
