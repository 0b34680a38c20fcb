"""The gevent reactor (the load processes' reader) on a scripted server: awkward splits and
stale keep-alive connections, run in a subprocess that monkey-patches as Locust does."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))  # the raw HTTP test server
from rawhttp import RawServer, chunked, sse_head

pytestmark = pytest.mark.usefixtures("reader")  # both stream readers (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
EVENTS = [
    b'data: {"choices":[{"delta":{"content":"a"}}]}',
    b'data: {"choices":[{"delta":{"content":"b"}}]}',
    b"data: [DONE]",
]
RESP = sse_head() + chunked(b"".join(e + b"\n\n" for e in EVENTS))

CLIENT = textwrap.dedent(r"""
    from gevent import monkey; monkey.patch_all()
    import sys, time, json
    from harness.client.http_stream import Endpoint, perf_ns, StreamError
    from harness.load.reactor import ReactorConnection
    conn = ReactorConnection(Endpoint.parse(sys.argv[1]), timeout_s=5)
    out = []
    for i in range(int(sys.argv[2])):
        try:
            _o, _s, res = conn.request("POST", "/v1/chat/completions", {}, b"{}", perf_ns() + 5 * 10**9)
            out.append({"ok": res.complete, "lines": [l.decode() for _, l in res.lines],
                        "monotone": [s for s, _ in res.lines] == sorted(s for s, _ in res.lines)})
        except StreamError as e:
            out.append({"error": e.kind})
        time.sleep(0.15)  # the server closes idle connections after 0.05 s
    print(json.dumps(out))
""")


def _client(url: str, n: int) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-c", CLIENT, url, str(n)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_stale_keep_alive_and_awkward_splits() -> None:
    want = {"ok": True, "lines": [e.decode() for e in EVENTS], "monotone": True}
    # conn 1: a response split inside 'data:' and between CR and LF, then the server closes the
    # idle connection (FIN); conn 2: reset (RST) after one response; conn 3: serves the rest
    cut = RESP.index(b"data:") + 3
    script1 = [
        ("request",),
        ("send", RESP[:cut]),
        ("sleep", 0.02),
        ("send", RESP[cut:-1]),
        ("sleep", 0.02),
        ("send", RESP[-1:]),
        ("sleep", 0.05),
        ("close",),
    ]
    with RawServer(
        [
            script1,
            [("request",), ("send", RESP), ("sleep", 0.05), ("reset",)],
            [("request",), ("send", RESP), ("request",), ("send", RESP), ("hold",)],
        ]
    ) as server:
        out = _client(server.url, 4)
        assert server.connections == 3 and len(server.requests) == 4
    assert out == [want] * 4
