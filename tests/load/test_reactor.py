"""The gevent epoll reactor (the load processes' reader), run in a subprocess under gevent.

The subprocess monkey-patches like Locust does, runs concurrent requests through
ReactorConnection against the fake OpenAI server, and prints one JSON line per case.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.usefixtures("reader")  # both stream readers (tests/conftest.py)

SCRIPT = textwrap.dedent(
    r"""
    from gevent import monkey; monkey.patch_all()
    import json, sys, gevent
    from harness.client.http_stream import Endpoint, warm_kernel_timestamps
    from harness.load.reactor import ReactorConnection, reactor
    from harness.client.request import RequestSpec, base_headers, execute
    from harness.client.adapters.base import get_adapter, Prompt
    from harness.metrics.record import RequestRecord

    url = sys.argv[1]
    warm_kernel_timestamps()
    ad = get_adapter("openai-chat")
    out = {}

    def one(model, n, key, conn=None):
        conn = conn or ReactorConnection(Endpoint.parse(url), timeout_s=float(sys.argv[2]))
        spec = RequestSpec(ad, model, {"itl_ms": 2}, {"include_usage": True}, base_headers(None, {}), timeout_s=float(sys.argv[2]))
        body = json.dumps(ad.build_body(Prompt("", "hi there", n), model, spec.sampling, spec.stream_options)).encode()
        rec = RequestRecord(index=0, class_name="a", request_id=key)
        execute(conn, spec, body, rec, lambda t: len(t.split()))
        out[key] = {"error": rec.error_kind, "chunks": len(rec.chunk_ns), "tokens": rec.chunk_tokens,
                    "out": rec.output_tokens, "clock": rec.clock, "monotone": rec.chunk_ns == sorted(rec.chunk_ns),
                    "ttft_positive": (rec.ttft_ns or 0) > 0}
        return conn

    jobs = [gevent.spawn(one, "ok", 20, f"ok{i}") for i in range(40)]
    jobs += [gevent.spawn(one, "multi", 9, "multi"), gevent.spawn(one, "cut", 9, "cut"),
             gevent.spawn(one, "error500", 5, "e500"), gevent.spawn(one, "malformed", 5, "malformed")]
    gevent.joinall(jobs, timeout=30)
    # keep-alive: two requests on one connection
    c = one("ok", 3, "ka1")
    one("ok", 3, "ka2", c)
    out["ka_reused"] = c.requests_on_conn
    # timeout: 200 tokens at 2 ms need 0.4 s; allow 0.1 s
    sys.argv[2] = "0.1"
    one("ok", 200, "slow")
    out["reactor_reads"] = reactor().reads
    out["native"] = reactor().native
    print(json.dumps(out))
    """
)


def run_script(url: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, url, "10"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_reactor_reads_concurrent_streams_and_classifies_errors(fake_openai, reader):
    out = run_script(fake_openai.url)
    assert out["native"] == (reader == "native")
    for i in range(40):
        r = out[f"ok{i}"]
        assert r["error"] is None and r["chunks"] == 20 and r["out"] == 20, r
        assert r["clock"] == "kernel" and r["monotone"] and r["ttft_positive"]
    assert out["multi"]["error"] is None and out["multi"]["tokens"] == [3, 3, 3]
    assert out["cut"]["error"] == "disconnect"
    assert out["e500"]["error"] == "http_5xx"
    assert out["malformed"]["error"] == "malformed"
    assert out["ka1"]["error"] is None and out["ka2"]["error"] is None and out["ka_reused"] == 2
    assert out["slow"]["error"] == "timeout"
    assert out["reactor_reads"] >= 40  # the reactor read every stream (a busy host coalesces chunks into fewer reads)
