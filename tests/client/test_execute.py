"""execute(): one real streaming request over HTTP, its record filled, errors classified by kind."""

from __future__ import annotations

import json
import socket

import pytest
from rawhttp import RawServer, chunked, sse_head

from harness.client.adapters.base import Prompt, get_adapter
from harness.client.http_stream import Connection, Endpoint
from harness.client.request import RequestSpec, base_headers, build_payload, execute
from harness.metrics.record import RequestRecord
from harness.workload.builtin_tokenizer import BuiltinTokenizer

pytestmark = pytest.mark.usefixtures("reader")  # both stream readers (tests/conftest.py)

count = BuiltinTokenizer().count


def _spec(model: str, api: str = "openai-chat", timeout_s: float = 10.0) -> RequestSpec:
    return RequestSpec(
        adapter=get_adapter(api),
        model=model,
        sampling={"temperature": 0.0, "itl_ms": 0.2},
        stream_options={"include_usage": True},
        headers=base_headers("sekrit", {"X-Extra": "1"}),
        timeout_s=timeout_s,
    )


def _run(
    url: str,
    model: str,
    max_tokens: int = 6,
    api: str = "openai-chat",
    conn: Connection | None = None,
    timeout_s: float = 10.0,
) -> RequestRecord:
    spec = _spec(model, api, timeout_s)
    conn = conn or Connection(Endpoint.parse(url), timeout_s=timeout_s)
    rec = RequestRecord(index=3, class_name="c", request_id="m3-1")
    return execute(conn, spec, build_payload(spec, Prompt("", "hello there", max_tokens)), rec, count)


def test_ok_stream(fake_openai) -> None:
    rec = _run(fake_openai.url, "ok")
    assert rec.ok and rec.http_status == 200
    assert len(rec.chunk_ns) == 6 and rec.chunk_tokens == [1] * 6
    assert rec.role_ns is not None and rec.role_ns <= rec.chunk_ns[0]
    assert (rec.input_tokens, rec.output_tokens, rec.output_source, rec.tokenizer_output_tokens) == (7, 6, "usage", 6)
    assert rec.sent_ns > 0 and rec.chunk_ns == sorted(rec.chunk_ns) and rec.chunk_ns[0] >= rec.sent_ns
    assert rec.ttft_ns == rec.chunk_ns[0] - rec.sent_ns  # closed loop: from the actual send
    assert rec.clock in ("kernel", "user") and rec.connect_ns > 0


def test_completions_api(fake_openai) -> None:
    rec = _run(fake_openai.url, "ok", api="openai-completions")
    assert rec.ok and len(rec.chunk_ns) == 6 and rec.output_tokens == 6


def test_multi_token_chunks(fake_openai) -> None:
    rec = _run(fake_openai.url, "multi", max_tokens=7)
    assert rec.ok and rec.chunk_tokens == [3, 3, 1] and rec.output_tokens == 7


def test_continuous_usage(fake_openai) -> None:
    rec = _run(fake_openai.url, "continuous", max_tokens=5)
    assert rec.ok and rec.output_source == "continuous_usage" and rec.chunk_tokens == [1] * 5


def test_reasoning(fake_openai) -> None:
    rec = _run(fake_openai.url, "reasoning", max_tokens=4)
    assert rec.ok and len(rec.chunk_ns) == 4  # the two reasoning chunks count


def test_no_usage(fake_openai) -> None:
    rec = _run(fake_openai.url, "nousage", max_tokens=4)
    assert rec.ok and rec.output_source == "tokenizer" and rec.output_tokens == 4 and rec.input_tokens is None


@pytest.mark.parametrize(
    "model,kind,detail",
    [
        ("error500", "http_5xx", "boom"),
        ("error429", "http_429", "slow down"),
        ("malformed", "malformed", "not JSON"),
        ("midstream", "server_error", "engine died"),
        ("cut", "disconnect", ""),
        ("empty", "empty_output", ""),
    ],
)
def test_error_kinds(fake_openai, model: str, kind: str, detail: str) -> None:
    rec = _run(fake_openai.url, model)
    assert not rec.ok and rec.error_kind == kind, rec.error_detail
    assert detail in rec.error_detail


def test_connection_survives_errors_and_is_reused(fake_openai) -> None:
    conn = Connection(Endpoint.parse(fake_openai.url), timeout_s=10)
    kinds = [_run(fake_openai.url, m, conn=conn).error_kind for m in ("ok", "error429", "ok", "cut", "ok")]
    assert kinds == [None, "http_429", None, "disconnect", None]


def _raw_error(status: str, body: bytes, ctype: str = "application/json") -> list:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    return [("request",), ("send", head + body), ("hold",)]


@pytest.mark.parametrize(
    "status,body,kind,detail",
    [
        (
            "400 Bad Request",
            json.dumps({"error": {"message": "max_tokens is too large: 99999"}}).encode(),
            "http_4xx",
            "max_tokens is too large: 99999",
        ),
        ("404 Not Found", json.dumps({"detail": "Not Found"}).encode(), "http_4xx", "Not Found"),
        (
            "400 Bad Request",
            json.dumps({"object": "error", "message": "model x does not exist"}).encode(),
            "http_4xx",
            "model x does not exist",
        ),
        ("422 Unprocessable", json.dumps({"error": "bad field"}).encode(), "http_4xx", "bad field"),
        ("503 Service Unavailable", b"overloaded, try later", "http_5xx", "overloaded, try later"),
        ("429 Too Many Requests", b"", "http_429", ""),
    ],
)
def test_http_errors_carry_the_server_message(status: str, body: bytes, kind: str, detail: str) -> None:
    with RawServer([_raw_error(status, body)]) as server:
        rec = _run(server.url, "x")
    assert (rec.error_kind, rec.error_detail, rec.http_status) == (kind, detail, int(status.split()[0]))


def test_connect_refused() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    rec = _run(f"http://127.0.0.1:{port}", "ok")
    assert rec.error_kind == "connect" and rec.sent_ns > 0


def test_timeout_mid_stream() -> None:
    events = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
    with RawServer([[("request",), ("send", sse_head() + chunked(events)[:-5]), ("hold",)]]) as server:
        rec = _run(server.url, "x", timeout_s=0.3)
    assert rec.error_kind == "timeout"


def test_done_then_close_without_terminal_chunk_is_a_disconnect() -> None:
    """Bytes stop mid chunked body (no terminal chunk): cut, even though [DONE] arrived."""
    events = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n'
    wire = sse_head() + chunked(events)[:-5]
    with RawServer([[("request",), ("send", wire), ("close",)]]) as server:
        rec = _run(server.url, "x")
    assert rec.error_kind == "disconnect"


def test_request_headers_and_body() -> None:
    resp = sse_head() + chunked(b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n')
    with RawServer([[("request",), ("send", resp), ("hold",)]]) as server:
        rec = _run(server.url, "mymodel", max_tokens=9)
        raw = server.requests[0]
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    for h in (
        "Accept-Encoding: identity",
        "Accept: text/event-stream",
        "Authorization: Bearer sekrit",
        "X-Extra: 1",
        "X-Request-Id: m3-1",
        "Content-Type: application/json",
    ):
        assert h in lines
    payload = json.loads(body)
    assert payload["model"] == "mymodel" and payload["max_tokens"] == 9 and payload["stream"] is True
    assert payload["stream_options"] == {"include_usage": True}
    assert rec.ok and rec.output_source == "tokenizer"
