"""The native reader (harness/client/_native.c) against the pure-Python one: same bytes in, same
stamps, lines, framing and errors out.

The recorded segments are real reads of the simulated engine over loopback TCP, each with the
kernel's receive stamp (tests/client/data/sim_stream_segments.json). Both readers get them as
recorded, then re-split at random places (every boundary a read can fall on), then byte by byte.
The native reader's own recvmsg is checked against Python's on the same segment (MSG_PEEK).
"""

from __future__ import annotations

import base64
import itertools
import json
import random
import socket
import sys
import threading
from pathlib import Path

import pytest

from harness.client import http_stream
from harness.client.http_stream import (
    _CMSG_SPACE,
    READ_SIZE,
    SO_TIMESTAMPNS,
    ResponseParser,
    StreamError,
    perf_ns,
    wall_ns,
)

native = pytest.importorskip("harness.client._native", reason="the native reader was not built here (no compiler)")

DATA = Path(__file__).parent / "data" / "sim_stream_segments.json"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from tick_server import C_LAST, C_ROLE, C_TOKEN, HEAD, chunk  # noqa: E402  (bench/ on sys.path first)

TAIL = (
    chunk(b'data: {"id":"b","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":21}}\n\n')
    + chunk(b"data: [DONE]\n\n")
    + b"0\r\n\r\n"
)
#: wire forms beyond the engine's: every framing, odd line ends, and the error paths
WIRES = {
    "tick": HEAD + C_ROLE + C_TOKEN * 20 + C_LAST + TAIL,
    "cr_lf_mixed": HEAD + chunk(b"data: a\r\n\r\ndata: b\rdata: c\r") + chunk(b"\ndata: d\n\n") + b"0\r\n\r\n",
    "chunk_extension_trailer": HEAD + b"5;foo=bar\r\ndata:\r\n2\r\n\n\n\r\n0\r\nX-Trailer: 1\r\n\r\n",
    "content_length": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 30\r\n\r\n"
    b"data: x\n\ndata: y\n\ndata: zzzzzzz",
    "close_delimited": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\ndata: tail",
    "json_error": b'HTTP/1.1 400 Bad\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"error":1}',
    "chunked_json": b"HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "lone_cr_in_one_chunk": HEAD + chunk(b"data: a\rb\n\n") + chunk(b"data: c\n\n") + b" 0 \r\n\r\n",
    "bad_chunk_size": HEAD + b"zz\r\nhello\r\n",
    "bad_status": b"HTTP/1.1 abc OK\r\n\r\n",
    "bad_length": b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
    "cut_mid_stream": HEAD + C_ROLE + C_TOKEN[:30],
}


def recorded() -> list[list[tuple[bytes, int]]]:
    doc = json.loads(DATA.read_text())
    return [[(base64.b64decode(d), stamp) for d, stamp in r["segments"]] for r in doc["responses"]]


def outcome(parser, segments: list[tuple[bytes, int]], eof_stamp: int | None) -> tuple:
    """Everything a reader produces for these segments (or the error it raised)."""
    try:
        for data, stamp in segments:
            if parser.done:
                break
            if data:
                parser.feed(data, stamp)
            else:
                parser.eof(stamp)
        if not parser.done and eof_stamp is not None:
            parser.eof(eof_stamp)
        r = parser.res
        return (
            "ok",
            parser.done,
            r.status,
            r.reason,
            r.headers,
            r.head_ns,
            r.lines,
            r.body,
            r.end_ns,
            r.reads,
            r.complete,
        )
    except StreamError as exc:
        return ("error", exc.kind, exc.detail)


def both(segments: list[tuple[bytes, int]], eof_stamp: int | None = None, max_line: int | None = None) -> tuple:
    py = ResponseParser()
    nat = native.Parser(max_line or http_stream.MAX_LINE_BYTES)
    return outcome(py, segments, eof_stamp), outcome(nat, segments, eof_stamp)


def resplit(segments: list[tuple[bytes, int]], cuts: list[int]) -> list[tuple[bytes, int]]:
    """The same bytes cut at `cuts`; each piece keeps the stamp of the recorded read it came from
    (a later cut inside one read is a read that arrived at the same instant)."""
    wire = b"".join(d for d, _ in segments)
    owner, pos = [], 0
    for k, (d, _) in enumerate(segments):
        owner += [k] * len(d)
        pos += len(d)
    edges = [0, *sorted(set(cuts)), len(wire)]
    return [(wire[a:b], segments[owner[b - 1]][1]) for a, b in itertools.pairwise(edges) if b > a]


def test_recorded_engine_reads_agree_on_every_stamp() -> None:
    for segments in recorded():
        py, nat = both(segments)
        assert py[0] == "ok" and py[1] and py[2] == 200, py[:3]
        assert nat == py
        lines = py[6]
        assert len(lines) > 5 and all(line.startswith(b"data:") for _, line in lines)
        assert [s for s, _ in lines] == sorted(s for s, _ in lines)


def test_recorded_reads_resplit_anywhere_agree() -> None:
    rnd = random.Random(29)
    for segments in recorded():
        size = sum(len(d) for d, _ in segments)
        for _ in range(150):
            cuts = rnd.sample(range(1, size), rnd.randint(1, 40))
            pieces = resplit(segments, cuts)
            py, nat = both(pieces)
            assert nat == py, cuts


def test_recorded_reads_byte_by_byte_agree() -> None:
    segments = recorded()[2]
    size = sum(len(d) for d, _ in segments)
    py, nat = both(resplit(segments, list(range(1, size))))
    assert py[0] == "ok" and nat == py


@pytest.mark.parametrize("name", sorted(WIRES))
def test_every_framing_and_error_agrees(name: str) -> None:
    wire = WIRES[name]
    rnd = random.Random(name)
    splits = [[], list(range(1, len(wire)))] + [
        rnd.sample(range(1, len(wire)), rnd.randint(1, min(12, len(wire) - 1))) for _ in range(200)
    ]
    for cuts in splits:
        segments = resplit([(wire, 0)], cuts)
        segments = [(d, 1000 + 7 * i) for i, (d, _) in enumerate(segments)]
        for eof_stamp in (None, 99_999):
            py, nat = both(segments, eof_stamp)
            assert nat == py, (cuts, eof_stamp)


def test_limits_agree() -> None:
    """A line without a line end and a non-streamed body are cut at the same size, same message."""
    long_line = HEAD + chunk(b"data: " + b"x" * 5000)
    body = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + b"y" * 5000
    head = b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"z" * 70000
    for wire in (long_line, body, head):
        segments = [(wire[i : i + 1000], i) for i in range(0, len(wire), 1000)]
        py_parser, nat_parser = ResponseParser(), native.Parser(4096)
        old = http_stream.MAX_LINE_BYTES
        http_stream.MAX_LINE_BYTES = 4096
        try:
            py = outcome(py_parser, segments, None)
        finally:
            http_stream.MAX_LINE_BYTES = old
        nat = outcome(nat_parser, segments, None)
        assert py[0] == "error" and nat == py


def test_eof_before_and_inside_the_head() -> None:
    for segments in ([], [(b"HTTP/1.1 200", 5)]):
        py, nat = both(segments, eof_stamp=9)
        assert py[0] == "error" and nat == py


def _stamped_pair():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    client = socket.create_connection(srv.getsockname())
    server, _ = srv.accept()
    srv.close()
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    return client, server


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "user"])
def test_native_recvmsg_stamps_as_python_does(kernel: bool) -> None:
    """The native reader's own read of a segment gets the stamp Python's recvmsg gives it: the
    segment is peeked from Python first (MSG_PEEK keeps it queued), then read natively."""
    http_stream.warm_kernel_timestamps()
    client, server = _stamped_pair()
    # 1 ms of margin: a stamp a hair later than "now" (the two clocks' offset is measured, not
    # exact) is clamped to each reader's own "now", which differ; the margin keeps both unclamped
    offset = wall_ns() - perf_ns() + 1_000_000
    wire = WIRES["tick"]
    parts = [wire[:120], *[wire[i : i + 150] for i in range(120, len(wire), 150)]]
    nat = native.Parser(http_stream.MAX_LINE_BYTES, client.fileno(), kernel, offset, 30)
    py = ResponseParser()
    try:
        for part in parts:
            server.sendall(part)
            got = b""
            while len(got) < len(part):  # the whole part is queued before we peek
                got, anc, _f, _a = client.recvmsg(READ_SIZE, _CMSG_SPACE, socket.MSG_PEEK)
            before = perf_ns()
            stamp = before
            if kernel:
                for level, kind, payload in anc:
                    if level == socket.SOL_SOCKET and kind == http_stream.SCM_TIMESTAMPNS:
                        sec, nsec = http_stream._TIMESPEC.unpack_from(payload)
                        stamp = min(sec * 1_000_000_000 + nsec - offset, before)
            n_before = nat.n_lines
            assert nat.read() is (part is parts[-1])
            py.feed(got, stamp)
            new = nat.res.lines[n_before:]
            if kernel:  # the same kernel stamp through the same arithmetic
                assert [s for s, _ in new] == [stamp] * len(new)
            else:  # stamped right after the native read: after our peek
                assert all(s >= before for s, _ in new)
        assert [line for _, line in nat.res.lines] == [line for _, line in py.res.lines]
        if kernel:
            assert nat.res.lines == py.res.lines
        assert nat.done and nat.res.complete
    finally:
        client.close()
        server.close()


def test_native_read_reports_would_block_and_disconnect() -> None:
    client, server = _stamped_pair()
    client.setblocking(False)
    nat = native.Parser(http_stream.MAX_LINE_BYTES, client.fileno(), True, 0, 0)
    try:
        assert nat.read() is False  # nothing there yet
        server.sendall(HEAD + C_ROLE)
        threading.Event().wait(0.05)
        assert nat.read() is False and nat.res.status == 200
        server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        server.close()
        threading.Event().wait(0.05)
        with pytest.raises(StreamError) as err:
            nat.read()
        assert err.value.kind == "disconnect" and "reset" in err.value.detail.lower()
    finally:
        client.close()


def test_reader_choice() -> None:
    assert http_stream.choose_reader("python") == "python"
    assert http_stream.choose_reader("native") == "native"
    assert http_stream.choose_reader("auto") == "native"
    with pytest.raises(ValueError, match="choose one of auto, native, python"):
        http_stream.choose_reader("fast")
