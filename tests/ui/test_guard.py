"""The web UI's guard over real HTTP: a running `harness ui` runs only the scenarios it was started
with, sends only to the target fixed at start, refuses state changes from other sites' pages, never
quotes a file it was not given, and keeps Locust's master for local workers on loopback.

Each of these failed on the code before the guard: /swarm took `scenario=/etc/shadow` and printed
its lines, took `host=` of the caller's choosing (the API key went there), and took any Origin.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import ClassVar

import psutil
import pytest
from webui import UI, started_uis  # the same running `harness ui` helper as the functional tests

from harness.run.target import free_port
from harness.ui.guard import ScenarioChoices, refuse_cross_site


@pytest.fixture
def ui_factory(tmp_path: Path):
    yield from started_uis(tmp_path)


def _post(ui: UI, path: str, form: dict[str, str], headers: dict[str, str] | None = None) -> tuple[int, dict]:
    data = urllib.parse.urlencode(form).encode()
    req = urllib.request.Request(ui.base + path, data=data, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, body = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    try:
        return status, json.loads(body)
    except ValueError:
        return status, {"raw": body.decode(errors="replace")}


class _Capture(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(f"GET {self.path} {self.headers.get('Authorization')}")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"data": [{"id": "m"}]}')

    do_POST = do_GET

    def log_message(self, *_a: object) -> None:
        pass


def test_form_cannot_choose_scenario_path_host_or_come_from_another_site(ui_factory, tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("TOPSECRET_line_one: 1\nhunter2_second: 2\n")
    capture = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=capture.serve_forever, daemon=True).start()
    try:
        ui = ui_factory()
        live = ui.get("/llm/api/live")

        # a path the UI was not started with is refused without being read
        status, res = _post(
            ui, "/swarm", {"user_count": "1", "spawn_rate": "1", "host": live["host"], "scenario": str(secret)}
        )
        assert status == 400 and not res["success"]
        assert "not one of the scenarios this UI was started with" in res["message"]
        assert "TOPSECRET" not in json.dumps(res) and "hunter2" not in json.dumps(res)
        for path in ("/etc/shadow", "/etc/passwd", "../../etc/passwd"):
            status, res = _post(ui, "/swarm", {"user_count": "1", "host": live["host"], "scenario": path})
            assert status == 400 and "root:" not in res["message"], res
        stats = json.dumps(ui.get("/stats/requests"))
        assert "TOPSECRET" not in stats and "root:" not in stats

        # the target is fixed: a host typed into the form (here a server that logs credentials) is refused
        evil = f"http://127.0.0.1:{capture.server_address[1]}"
        status, res = _post(ui, "/swarm", {"user_count": "1", "spawn_rate": "1", "host": evil})
        assert status == 400 and "the target is fixed" in res["message"], res
        assert ui.get("/llm/api/live")["state"] == "idle"
        assert _Capture.seen == []

        # another site's page cannot start or stop a test (Origin, Sec-Fetch-Site), nor reset stats
        form = {"user_count": "1", "spawn_rate": "1", "host": live["host"]}
        for headers in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Referer": "http://evil.example/page"},
            {"Origin": f"http://127.0.0.1:{free_port()}"},
        ):
            for path in ("/swarm", "/stop", "/stats/reset"):
                status, res = _post(ui, path, form, headers)
                assert status == 403 and "refused" in res["message"], (path, headers, res)
        # DNS rebinding: a page on evil.example resolved to 127.0.0.1 sends Host: evil.example
        req = urllib.request.Request(ui.base + "/llm/api/live", headers={"Host": f"evil.example:{ui.port}"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 403
        assert ui.get("/llm/api/live")["state"] == "idle" and _Capture.seen == []

        # reads are same-origin only: no answer, a CORS preflight's included, lets another site's page
        # read it (Locust's CORS(app) reflected any Origin: audit R1; the browser test has the page)
        for method, path in (
            ("GET", "/llm/api/live"),
            ("GET", "/stats/requests"),
            ("GET", "/logs"),
            ("GET", "/llm/runs/none/summary.json"),
            ("OPTIONS", "/llm/api/live"),
        ):
            req = urllib.request.Request(
                ui.base + path,
                method=method,
                headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "GET"},
            )
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    headers = dict(resp.headers)
            except urllib.error.HTTPError as exc:
                headers = dict(exc.headers)
            assert not [h for h in headers if h.lower().startswith("access-control-")], (method, path, headers)

        # the UI's own page (same Origin) still starts and stops a test
        own = {"Origin": ui.base, "Sec-Fetch-Site": "same-origin"}
        status, res = _post(
            ui, "/swarm", {**form, "measured_window": "0", "scenario": str(tmp_path / "webui.yaml")}, own
        )
        assert status == 200 and res.get("success"), res
        ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "measuring", 40, "the test to start")
        status, _res = _post(ui, "/stop", {}, own)
        assert status == 200
        ui.wait_for(lambda: ui.get("/llm/api/live")["state"] == "finished", 40, "the run to be written")
        assert ui.get("/llm/api/live")["target"] == live["host"]  # the simulator, not anything from the form
        assert live["scenarios"] == [str((tmp_path / "webui.yaml").resolve())]
    finally:
        capture.shutdown()
    assert "Traceback" not in Path(ui.log.name).read_text()


def _listening(pid: int) -> list[tuple[str, int]]:
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    out = []
    for proc in procs:
        try:
            conns = proc.net_connections(kind="inet")
        except psutil.Error:
            continue
        out += [(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def test_local_worker_processes_talk_to_the_master_on_loopback_only(ui_factory) -> None:
    ui = ui_factory("--processes", "2")
    ui.wait_for(
        lambda: '"worker_count": 2' in urllib.request.urlopen(ui.base + "/", timeout=10).read().decode(),
        40,
        "two workers",
    )
    addrs = _listening(ui.proc.pid)
    assert addrs, "no listening socket found"
    assert all(psutil_ip in ("127.0.0.1", "::1") for psutil_ip, _port in addrs), addrs
    assert 5557 not in {port for _ip, port in addrs}  # a free port, not Locust's fixed default


def test_scenario_choices_from_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    for name in ("b.yaml", "a.yml", "notes.txt"):
        (tmp_path / "d" / name).write_text("x: 1\n")
    one = tmp_path / "one.yaml"
    one.write_text("x: 1\n")
    choices = ScenarioChoices.from_args([str(one), str(tmp_path / "d")])
    assert [f.name for f in choices.files] == ["one.yaml", "a.yml", "b.yaml"]
    assert choices.pick("") == one.resolve() and choices.pick("b") == (tmp_path / "d" / "b.yaml").resolve()
    assert choices.pick(str(tmp_path / "d" / ".." / "d" / "a.yml")) == (tmp_path / "d" / "a.yml").resolve()
    from harness.errors import UserError

    for bad in ("/etc/passwd", str(tmp_path / "d" / "notes.txt"), "nope"):
        with pytest.raises(UserError, match="not one of the scenarios"):
            choices.pick(bad)
    with pytest.raises(UserError, match="no scenario files"):
        (tmp_path / "e").mkdir()
        ScenarioChoices.from_args([str(tmp_path / "e")])


@pytest.mark.parametrize(
    ("method", "headers", "loopback", "refused"),
    [
        ("POST", {"Host": "127.0.0.1:8089"}, True, False),  # curl: no browser headers
        ("POST", {"Host": "127.0.0.1:8089", "Origin": "http://127.0.0.1:8089"}, True, False),
        (
            "POST",
            {"Host": "localhost:8089", "Origin": "http://localhost:8089", "Sec-Fetch-Site": "same-origin"},
            True,
            False,
        ),
        ("POST", {"Host": "127.0.0.1:8089", "Origin": "http://127.0.0.1:9999"}, True, True),
        ("POST", {"Host": "127.0.0.1:8089", "Origin": "http://evil.example"}, True, True),
        ("POST", {"Host": "127.0.0.1:8089", "Sec-Fetch-Site": "same-site"}, True, True),
        ("POST", {"Host": "127.0.0.1:8089", "Referer": "https://evil.example/x"}, True, True),
        ("GET", {"Host": "127.0.0.1:8089", "Sec-Fetch-Site": "cross-site"}, True, False),  # reading is not a change
        ("GET", {"Host": "evil.example:8089"}, True, True),  # rebinding
        ("GET", {"Host": "10.0.0.5:8089"}, False, False),  # --web-host '*': any Host
        ("POST", {"Host": "[::1]:8089", "Origin": "http://[::1]:8089"}, True, False),
    ],
)
def test_refuse_cross_site(method: str, headers: dict[str, str], loopback: bool, refused: bool) -> None:
    assert (refuse_cross_site(method, headers, loopback) is not None) == refused
