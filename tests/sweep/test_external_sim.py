"""Kind external: a sweep attached to a server it did not start (here the simulated engine in its
own process, as a deployment would be). Load levels run against it; nothing is started or
stopped, so the server still answers afterwards; a server that is not there fails the cells with
the probe's reason instead of hanging."""

import json
import socket
import subprocess
import sys
import urllib.request

import yaml
from waiting import wait_until

from harness.cli.main import main
from harness.report.build import build_sweep_report
from harness.report.sweep_data import load_sweep

from .conftest import DATA


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def test_load_levels_against_a_running_server(tmp_path, capsys):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "harness.sim", "--port", str(port), "--sim-speed", "20"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _up(url), f"the simulated engine at {url}")
        (tmp_path / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())
        sweep = {
            "name": "deployed",
            "engine": {"kind": "external", "url": url, "reset_path": "/reset_prefix_cache"},
            "scenarios": ["tiny.yaml"],
            "loads": {"load.concurrency": [1, 4]},
        }
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(sweep))
        out = tmp_path / "out"
        assert main(["sweep", str(path), "--out", str(out), "--no-report"]) == 0
        captured = capsys.readouterr()
        assert "(a server already running: nothing is started)" in captured.err
        # each level ranked on its own: the closing table has one block per level
        assert "scenario tiny @ concurrency=1: configs ranked" in captured.out
        assert "scenario tiny @ concurrency=4: configs ranked" in captured.out

        cells = json.loads((out / "index.json").read_text())["cells"]
        assert [(c["load_level"], c["status"], c["url"], c["argv"]) for c in cells] == [
            ("concurrency=1", "complete", url, []),
            ("concurrency=4", "complete", url, []),
        ]
        assert not any("prefix cache not reset" in n for c in cells for n in c.get("notes", []))
        assert server.poll() is None and _up(url)  # the sweep did not stop what it did not start
    finally:
        server.terminate()
        server.wait(timeout=10)

    # the report joins the config's levels into one curve per percentile, points labelled by load
    doc = build_sweep_report(load_sweep(out))
    for ax in doc.figures["latency_vs_throughput"].figure.axes:
        curves = [ln for ln in ax.get_lines() if ln.get_label() == "_curve"]
        assert len(curves) == 2 and all(len(ln.get_xdata()) == 2 for ln in curves)  # p50 and p99, 2 levels
        assert sorted(t.get_text() for t in ax.texts) == ["1 user", "4 users"]
    good = doc.figures["goodput"].figure.axes[0]
    assert [c.get_label() for c in good.containers] == ["concurrency=1", "concurrency=4"]

    # the server is gone: the cells fail with the probe's reason, quickly
    sweep["engine"]["ready_timeout_s"] = 1
    path.write_text(yaml.safe_dump(sweep))
    assert (
        main(["sweep", str(path), "--out", str(tmp_path / "gone"), "--no-report"]) == 1
    )  # every cell failed: the sweep says so and exits 1
    cells = json.loads((tmp_path / "gone" / "index.json").read_text())["cells"]
    assert {c["status"] for c in cells} == {"failed"}
    assert f"{url} not ready after 1 s" in cells[0]["reason"]
