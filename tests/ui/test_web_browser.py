"""The web UI in a real headless Chromium: start a test from Locust's form, watch the LLM tab and
the /llm dashboard fill in, stop it, follow the report link.

Screenshots go to tests/load/artifacts/ (ignored by git): llm_tab.png, llm_dashboard_live.png,
llm_run_tab.png, llm_dashboard_finished.png.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from chromium import MARKS, headless_chromium
from waiting import wait_until

from harness.run.target import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"

pytestmark = MARKS


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory):
    """One web UI (and its simulated engine) for the module: the start/watch/stop test runs its test
    on it, then the other-origin test reads the same UI (a Locust process + simulator + Chromium
    cost ~9 CPU-s to start on the 2-core box)."""
    tmp_path = tmp_path_factory.mktemp("webui")
    scenario = tmp_path / "chat.yaml"
    scenario.write_text(
        json.dumps(
            {
                "name": "chat-mix",
                "load": {"concurrency": 8, "duration_s": 600},
                "warmup": {"requests": 4},
                "workload": {
                    "classes": [
                        {
                            "name": "chat",
                            "weight": 3,
                            "input_tokens": {"dist": "uniform", "min": 32, "max": 256},
                            "output_tokens": {"dist": "uniform", "min": 32, "max": 96},
                        },
                        {"name": "summarize", "weight": 1, "input_tokens": 1024, "output_tokens": 48},
                    ]
                },
            }
        )
    )
    port = free_port()
    log = open(tmp_path / "ui.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "ui",
            str(scenario),
            "--web-port",
            str(port),
            "--results",
            str(tmp_path / "results"),
            "--sim-args",
            "--sim-speed 2 --max-num-seqs 16",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"

    def live() -> bool:
        assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
        try:
            urllib.request.urlopen(base + "/llm/api/live", timeout=2).read()
            return True
        except OSError:
            return False

    wait_until(live, "the web UI's /llm/api/live")
    yield base, tmp_path
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    log.close()


@pytest.fixture(scope="module")
def browser():
    yield from headless_chromium(1500, 1000)


def _rendered(driver) -> None:
    """Return once the browser has laid out and painted two frames since now (after a resize)."""
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "requestAnimationFrame(() => requestAnimationFrame(() => done(true)));"
    )


def _shot(driver, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / ".gitignore").write_text("*\n")
    driver.save_screenshot(str(ARTIFACTS / name))


def _number(text: str) -> float | None:
    m = re.fullmatch(r"[\d,]+(\.\d+)?", text.strip())
    return float(text.replace(",", "")) if m else None


def test_start_watch_stop_in_chromium(ui, browser) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    base, tmp = ui
    d = browser
    wait = WebDriverWait(d, 45, poll_frequency=0.25)
    d.get(base + "/")
    wait.until(ec.element_to_be_clickable((By.XPATH, "//form//button[@type='submit']"))).click()

    # Locust's page with the plugin's tabs: the LLM tab fills in while the test runs
    tab = wait.until(ec.element_to_be_clickable((By.XPATH, "//button[@role='tab'][normalize-space()='LLM']")))
    tab.click()

    def total_row_filled(drv):
        cells = drv.find_elements(By.XPATH, "//tr[td[1][normalize-space()='All classes']]/td")
        texts = [c.text for c in cells]
        return (
            texts
            if len(texts) == 14 and _number(texts[1]) and all(_number(t) is not None for t in texts[5:])
            else False
        )

    cells = wait.until(total_row_filled)
    headers = [h.text for h in d.find_elements(By.XPATH, "//table//th")]
    assert headers[:2] == ["Class", "Requests"] and "TTFT p99" in headers and "ITL p50 (ms/token)" in headers
    assert _number(cells[1]) > 0 and _number(cells[5]) > 0  # requests, TTFT p50 (ms)
    classes = [td.text for td in d.find_elements(By.XPATH, "//tbody/tr/td[1]")]
    assert classes[-1] == "All classes" and "chat" in classes
    first = _number(cells[1])
    wait.until(
        lambda drv: (total_row_filled(drv) or [0, 0])[1] and _number(total_row_filled(drv)[1]) >= 2 * first
    )  # more traffic for the screenshot
    _shot(d, "llm_tab.png")

    # the /llm dashboard in a second tab: cards, per-class table and charts
    locust_tab = d.current_window_handle
    d.switch_to.new_window("tab")
    d.get(base + "/llm")
    wait.until(lambda drv: drv.find_element(By.ID, "state").text.lower() == "measuring")
    wait.until(lambda drv: len(drv.find_elements(By.CSS_SELECTOR, "#c-ttft path.l1")) == 1)
    assert _number(d.find_element(By.ID, "k-ttft").text.replace("ms", "")) > 0
    d.set_window_size(1500, 1400)  # the whole dashboard, charts included
    _rendered(d)
    _shot(d, "llm_dashboard_live.png")
    d.set_window_size(1500, 1000)

    # Stop from Locust's header; the run drains and is written
    d.switch_to.window(locust_tab)
    d.find_element(By.XPATH, "//button[normalize-space()='Stop']").click()
    d.find_element(By.XPATH, "//button[@role='tab'][normalize-space()='LLM run']").click()
    wait.until(lambda drv: drv.find_elements(By.XPATH, "//tr[td[1]='State']/td[2][normalize-space()='finished']"))
    # addresses are links, not plain text (audit D14): a click on the dashboard's opens it
    dash_cell = wait.until(
        lambda drv: drv.find_elements(By.XPATH, "//tr[td[1]='Live dashboard']/td[2][@data-harness-link='/llm']")
    )[0]
    assert dash_cell.value_of_css_property("cursor") == "pointer"
    assert not d.find_elements(By.XPATH, "//tr[td[1]='Run directory']/td[2][@data-harness-link]")  # a server path
    handles = set(d.window_handles)
    dash_cell.click()
    WebDriverWait(d, 10).until(lambda drv: len(set(drv.window_handles) - handles) == 1)
    (opened,) = set(d.window_handles) - handles
    d.switch_to.window(opened)
    WebDriverWait(d, 10).until(lambda drv: drv.current_url.endswith("/llm"))
    d.close()
    d.switch_to.window(locust_tab)
    _shot(d, "llm_run_tab.png")

    d.switch_to.window(d.window_handles[-1])
    link = WebDriverWait(d, 90, poll_frequency=0.5).until(
        ec.presence_of_element_located((By.XPATH, "//a[normalize-space()='Open report']"))
    )
    d.execute_script("window.scrollTo(0, 0)")
    _shot(d, "llm_dashboard_finished.png")
    href = link.get_attribute("href")
    report = urllib.request.urlopen(href, timeout=10).read().decode()
    assert "<html" in report.lower() and "chat-mix" in report
    (run,) = list((tmp / "results").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["requests"]["completed"] > 0 and (run / "report.html").exists()
    assert summary["client"]["cut_at_end"] == 0


def test_a_page_on_another_origin_cannot_read_the_ui(ui, browser) -> None:
    """Audit R1: Locust's CORS(app) answered every GET with the caller's Origin allowed, so a page
    served from anywhere else read the live stats, the logs and the run directory's path. Here a
    page on another origin (another port) fetches them in Chromium and gets nothing back."""
    import http.server
    import threading

    base, _tmp = ui

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<!doctype html><title>elsewhere</title><p>another site")

        def log_message(self, *_a: object) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        browser.set_script_timeout(20)
        browser.get(f"http://127.0.0.1:{other.server_address[1]}/")
        read = browser.execute_async_script(
            """
            const [ui, done] = arguments, out = {};
            (async () => {
              for (const path of ["/llm/api/live", "/stats/requests", "/logs", "/tasks"]) {
                try { out[path] = (await (await fetch(ui + path)).text()).slice(0, 80); }
                catch (e) { out[path] = "blocked: " + e.name; }
              }
              done(out);
            })();""",
            base,
        )
        assert read and all(v.startswith("blocked: TypeError") for v in read.values()), read
        # the UI's own page still reads them
        browser.get(base + "/llm")
        own = browser.execute_async_script(
            "const done = arguments[0]; fetch('/llm/api/live').then(r => r.json()).then(j => done(j.state));"
        )
        assert own in ("idle", "finished"), own  # the module's UI: idle, or after the start/watch/stop test
    finally:
        other.shutdown()
