"""Kind external: a sweep attached to a server it did not start (here the simulated engine in its
own process, as a deployment would be). Load levels run against it; nothing is started or
stopped, so the server still answers afterwards; a server that is not there fails the cells with
the probe's reason instead of hanging."""

import json
import socket
import subprocess
import sys
import time
import urllib.request

import yaml

from harness.cli.main import main

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
    server = subprocess.Popen([sys.executable, "-m", "harness.sim", "--port", str(port), "--sim-speed", "20"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not _up(url) and time.monotonic() < deadline:
            time.sleep(0.2)
        (tmp_path / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())
        sweep = {"name": "deployed", "engine": {"kind": "external", "url": url, "reset_path": "/reset_prefix_cache"},
                 "scenarios": ["tiny.yaml"], "loads": {"load.concurrency": [1, 4]}}
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(sweep))
        out = tmp_path / "out"
        assert main(["sweep", str(path), "--out", str(out), "--no-report"]) == 0
        err = capsys.readouterr().err
        assert "(a server already running: nothing is started)" in err

        cells = json.loads((out / "index.json").read_text())["cells"]
        assert [(c["load_level"], c["status"], c["url"], c["argv"]) for c in cells] == [
            ("concurrency=1", "complete", url, []), ("concurrency=4", "complete", url, []),
        ]
        assert not any("prefix cache not reset" in n for c in cells for n in c.get("notes", []))
        assert server.poll() is None and _up(url)  # the sweep did not stop what it did not start
    finally:
        server.terminate()
        server.wait(timeout=10)

    # the server is gone: the cells fail with the probe's reason, quickly
    sweep["engine"]["ready_timeout_s"] = 1
    path.write_text(yaml.safe_dump(sweep))
    assert main(["sweep", str(path), "--out", str(tmp_path / "gone"), "--no-report"]) == 1  # every cell failed: the sweep says so and exits 1
    cells = json.loads((tmp_path / "gone" / "index.json").read_text())["cells"]
    assert {c["status"] for c in cells} == {"failed"}
    assert f"{url} not ready after 1 s" in cells[0]["reason"]
