"""The raw HTTP/1.1 streaming reader against a scripted socket server: framing, stamps, reuse."""

from __future__ import annotations

import itertools
import json
import select
import socket
import time

import pytest
from rawhttp import RawServer, chunked, sse_head
from waiting import HANG_S, wait_until

from harness.client import http_stream
from harness.client.http_stream import Connection, Endpoint, StreamError, perf_ns

pytestmark = pytest.mark.usefixtures("reader")  # both stream readers (tests/conftest.py)

EVENTS = [
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}',
    b'data: {"choices":[{"delta":{"content":" alpha"}}]}',
    b'data: {"choices":[{"delta":{"content":" beta"}}]}',
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}',
    b"data: [DONE]",
]
SSE = b"".join(e + b"\n\n" for e in EVENTS) + b": a comment line\n\n"


def _request(server: RawServer, conn: Connection | None = None, timeout_s: float = 5.0, **kw):
    conn = conn or Connection(Endpoint.parse(server.url), timeout_s=timeout_s, **kw)
    deadline = perf_ns() + int(timeout_s * 1e9)
    _offset, sent, res = conn.request("POST", "/v1/chat/completions", {"X-A": "1"}, b'{"x":1}', deadline)
    return conn, sent, res


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(c for c in cuts if 0 < c < len(data)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


def _wire_chunked() -> bytes:
    # chunk boundaries fall inside lines and inside the "\n\n" separators
    body = SSE
    pieces = [body[:7], body[7:70], body[70:71], body[71:150], body[150:]]
    return sse_head() + chunked(*pieces)


def _awkward_cuts(wire: bytes) -> dict[str, list[int]]:
    head_end = wire.index(b"\r\n\r\n")
    first_size = head_end + 4
    data_pos = wire.index(b"data:", first_size)
    last_zero = wire.rindex(b"0\r\n\r\n")
    return {
        "inside_head": [10, head_end + 1, head_end + 3],
        "size_line_cr_lf": [first_size + 1, first_size + 2, wire.index(b"\r\n", first_size) + 1],
        "inside_data_prefix": [data_pos + 2, data_pos + 60, wire.index(b"[DONE]") + 3],
        "between_event_newlines": [wire.index(b"\n\n", data_pos) + 1, wire.index(b"usage") + 1],
        "terminal_chunk": [last_zero + 1, last_zero + 2, last_zero + 3, last_zero + 4],
    }


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "user"])
@pytest.mark.parametrize(
    "case", ["inside_head", "size_line_cr_lf", "inside_data_prefix", "between_event_newlines", "terminal_chunk"]
)
def test_chunked_sse_split_anywhere(case: str, kernel: bool) -> None:
    wire = _wire_chunked()
    parts = _split(wire, _awkward_cuts(wire)[case])
    script = [("request",)]
    for part in parts:
        script += [("send", part), ("sleep", 0.01)]
    with RawServer([[*script, ("hold",)]]) as server:
        conn, sent, res = _request(server, kernel_stamps=kernel)
    assert res.status == 200 and res.complete
    assert [line for _, line in res.lines] == EVENTS  # comments and blank lines dropped
    stamps = [s for s, _ in res.lines]
    assert stamps == sorted(stamps) and stamps[0] >= sent
    # each line is stamped by the read that completed it: never before that part was sent
    bounds, pos = [], 0
    for part in parts:
        pos += len(part)
        bounds.append(pos)
    for stamp, line in res.lines:
        k = next(i for i, b in enumerate(bounds) if b > _newline_offset(wire, line))
        assert stamp >= server.sent_ns[k] - 200_000, (line, k)
    assert conn.kernel is kernel


def _newline_offset(wire: bytes, line: bytes) -> int:
    """Offset in the chunked wire of the newline that ends `line` (framing may split the line)."""
    head_end = wire.index(b"\r\n\r\n") + 4
    body, mapping, pos = b"", [], head_end
    while True:
        eol = wire.index(b"\r\n", pos)
        size = int(wire[pos:eol], 16)
        if size == 0:
            break
        start = eol + 2
        body += wire[start : start + size]
        mapping += range(start, start + size)
        pos = start + size + 2
    return mapping[body.index(line) + len(line)]


def test_byte_by_byte() -> None:
    wire = _wire_chunked()
    script = [("request",)] + [("send", wire[i : i + 1]) for i in range(len(wire))] + [("hold",)]
    with RawServer([script]) as server:
        _conn, _sent, res = _request(server)
    assert res.complete and [line for _, line in res.lines] == EVENTS


def test_content_length_sse() -> None:
    body = SSE
    head = sse_head(f"Content-Length: {len(body)}\r\n")
    script = [("request",), ("send", head + body[:33]), ("sleep", 0.01), ("send", body[33:]), ("hold",)]
    with RawServer([script]) as server:
        conn, _sent, res = _request(server)
        assert res.complete and [line for _, line in res.lines] == EVENTS
        assert conn.sock is not None  # a complete keep-alive response keeps the connection


def test_content_length_body_cut_short() -> None:
    body = SSE
    head = sse_head(f"Content-Length: {len(body) + 50}\r\n")
    with RawServer([[("request",), ("send", head + body), ("close",)]]) as server:
        conn, _sent, res = _request(server)
    assert not res.complete
    assert [line for _, line in res.lines] == EVENTS
    assert conn.sock is None  # an incomplete response closes the connection


def test_close_delimited_body() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    last = b'data: {"x": "no trailing newline"}'
    with RawServer(
        [[("request",), ("send", head + SSE[:40]), ("sleep", 0.01), ("send", SSE[40:] + last), ("close",)]]
    ) as server:
        conn, _sent, res = _request(server)
    assert res.complete  # EOF ends a close-delimited body
    assert [line for _, line in res.lines] == [*EVENTS, last]
    assert conn.sock is None


def test_non_sse_body_kept_whole() -> None:
    err = json.dumps({"error": {"message": "nope"}}).encode()
    head = f"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {len(err)}\r\n\r\n".encode()
    with RawServer([[("request",), ("send", head + err[:5]), ("sleep", 0.01), ("send", err[5:]), ("hold",)]]) as server:
        _conn, _sent, res = _request(server)
    assert (res.status, res.reason, res.body, res.lines) == (400, "Bad Request", err, [])


def test_request_head_and_body_on_the_wire() -> None:
    resp = sse_head() + chunked(b"data: [DONE]\n\n")
    with RawServer([[("request",), ("send", resp), ("hold",)]]) as server:
        ep = Endpoint.parse(server.url + "/base/")
        conn = Connection(ep)
        conn.request("POST", "/v1/completions", {"Authorization": "Bearer k"}, b'{"a":1}', perf_ns() + 5 * 10**9)
        raw = server.requests[0]
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /base/v1/completions HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}".encode() in lines
    assert b"Authorization: Bearer k" in lines and b"Content-Length: 7" in lines
    assert body == b'{"a":1}'


def test_endpoint_parse() -> None:
    assert Endpoint.parse("http://h:8000/") == Endpoint("h", 8000, False, "")
    assert Endpoint.parse("https://h/x") == Endpoint("h", 443, True, "/x")
    assert Endpoint.parse("https://h/x").host_header == "h"
    assert Endpoint.parse("http://h:81").host_header == "h:81"
    with pytest.raises(ValueError):
        Endpoint.parse("h:8000")


def test_keep_alive_reuses_one_connection() -> None:
    resp = sse_head() + chunked(SSE)
    with RawServer([[("request",), ("send", resp), ("request",), ("send", resp), ("hold",)]]) as server:
        conn, _s, r1 = _request(server)
        conn, _s, r2 = _request(server, conn)
        assert r1.complete and r2.complete and server.connections == 1 and conn.requests_on_conn == 2


def test_close_right_after_last_chunk_is_complete() -> None:
    body = sse_head() + chunked(SSE)
    with RawServer([[("request",), ("send", body[:-2]), ("close",)]]) as server:
        _conn, _s, res = _request(server)
    assert res.complete and [line for _, line in res.lines] == EVENTS


def test_terminal_crlf_in_a_later_read_leaves_the_connection_usable() -> None:
    """A segment boundary between "0\\r\\n" and the final "\\r\\n" must not poison the next response."""
    body = sse_head() + chunked(SSE)
    resp2 = sse_head() + chunked(b"data: [DONE]\n\n")
    script = [
        ("request",),
        ("send", body[:-2]),
        ("sleep", 0.05),
        ("send", body[-2:]),
        ("request",),
        ("send", resp2),
        ("hold",),
    ]
    with RawServer([script]) as server:
        conn, _s, r1 = _request(server)
        conn, _s, r2 = _request(server, conn)
    assert r1.complete and r2.status == 200 and r2.complete
    assert [line for _, line in r2.lines] == [b"data: [DONE]"]


@pytest.mark.parametrize("how", ["close", "reset"])
def test_stale_keep_alive_is_retried_once(how: str) -> None:
    resp = sse_head() + chunked(SSE)
    with RawServer(
        [[("request",), ("send", resp), ("sleep", 0.05), (how,)], [("request",), ("send", resp), ("hold",)]]
    ) as server:
        conn, _s, r1 = _request(server)
        wait_until(lambda: server.closed == 1, "the server to close the idle connection")
        conn, _s, r2 = _request(server, conn)
        assert r1.complete and r2.complete and server.connections == 2
        assert len(server.requests) == 2  # the retry went out once, on the new connection


def test_stale_retry_happens_only_once() -> None:
    resp = sse_head() + chunked(SSE)
    with RawServer(
        [
            [("request",), ("send", resp), ("sleep", 0.05), ("close",)],
            [("request",), ("close",)],
            [("request",), ("send", resp), ("hold",)],
        ]
    ) as server:
        conn, _s, _r1 = _request(server)
        wait_until(lambda: server.closed == 1, "the server to close the idle connection")
        with pytest.raises(StreamError) as info:
            _request(server, conn)
        assert server.connections == 2
    assert info.value.kind == "disconnect"


def test_fresh_connection_closed_before_head_is_a_disconnect() -> None:
    with RawServer([[("request",), ("close",)]]) as server:
        with pytest.raises(StreamError) as info:
            _request(server)
        assert server.connections == 1
    assert info.value.kind == "disconnect"


def test_connect_refused() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(StreamError) as info:
        Connection(Endpoint.parse(f"http://127.0.0.1:{port}")).connect()
    assert info.value.kind == "connect"


def test_read_timeout() -> None:
    head = sse_head() + chunked(EVENTS[1] + b"\n\n")[:-5]  # one event, then silence
    with RawServer([[("request",), ("send", head), ("hold",)]]) as server, pytest.raises(StreamError) as info:
        _request(server, timeout_s=0.3)
    assert info.value.kind == "timeout"


@pytest.mark.parametrize(
    "wire,detail",
    [
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\nzz\r\n",
            "bad chunk size",
        ),
        (b"garbage\r\n\r\n", "bad status line"),
    ],
)
def test_malformed_framing(wire: bytes, detail: str) -> None:
    with RawServer([[("request",), ("send", wire), ("hold",)]]) as server, pytest.raises(StreamError) as info:
        _request(server)
    assert info.value.kind == "malformed" and detail in info.value.detail


def test_kernel_stamp_is_arrival_time_user_stamp_is_read_time() -> None:
    """Data that waited in the socket buffer: the kernel stamp says when it arrived."""
    # Linux turns receive timestamping on for all sockets lazily (a deferred static key) when the
    # first socket asks; until then a read is stamped at recv time. Keep one socket asking.
    # (the load process does this at start: http_stream.warm_kernel_timestamps)
    assert http_stream.warm_kernel_timestamps()
    time.sleep(0.1)  # the kernel enables the key from a work queue: nothing to observe but time
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    for kernel in (True, False):
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        if kernel:
            client.setsockopt(socket.SOL_SOCKET, http_stream.SO_TIMESTAMPNS, 1)
        offset = http_stream.wall_ns() - perf_ns()
        before_send = perf_ns()
        server.sendall(b"data: x\n")
        assert select.select([client], [], [], HANG_S)[0]  # the data waits in the socket buffer
        read_start = perf_ns()
        data, stamp = http_stream._read(client.recvmsg if kernel else None, client.recv, offset)
        assert data == b"data: x\n"
        if kernel:
            assert before_send - 200_000 <= stamp < read_start
        else:
            assert stamp >= read_start
        client.close()
        server.close()
    listener.close()


def test_cr_only_line_endings_parse() -> None:
    """The SSE spec allows a lone CR as the line end (audit Low 18: every request was malformed)."""
    events = (
        b'data: {"choices":[{"delta":{"content":" a"}}]}\r\r',
        b'data: {"choices":[{"delta":{"content":" b"}}]}\r\r',
        b"data: [DONE]\r\r",
    )
    with RawServer([[("request",), ("send", sse_head() + chunked(*events)), ("hold",)]]) as server:
        _conn, _sent, res = _request(server)
    assert [line for _, line in res.lines] == [e.rstrip(b"\r") for e in events] and res.complete


def test_line_without_newline_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server streaming data with no line end is cut at MAX_LINE_BYTES, not buffered without bound."""
    monkeypatch.setattr(http_stream, "MAX_LINE_BYTES", 256 << 10)
    blob = b"z" * 65536
    script = [("request",), ("send", sse_head() + b"7\r\ndata: {\r\n")]
    script += [("send", b"%x\r\n%s\r\n" % (len(blob), blob))] * 64 + [("hold",)]
    with RawServer([script]) as server, pytest.raises(StreamError) as exc:
        _request(server)
    assert exc.value.kind == "malformed" and "line" in exc.value.detail
