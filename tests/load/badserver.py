#!/usr/bin/env python3
# Vendored from the reliability audit of commit f79ef64: shared/audits/2026-12-01/badserver.py
# (see reliability.md, group 2). Kept byte-for-byte below this header except this comment, so the
# regression test tests/load/test_badserver_modes.py replays exactly the modes the audit tried.
"""A deliberately misbehaving OpenAI-ish server on 127.0.0.1 (raw asyncio sockets, full control).

usage: badserver.py MODE [--port P] [--good-first N]
  --good-first N: the first N POST requests get a well-formed stream (so preflight's probe passes
                  and the load sees the fault); default 1. 0 = the probe sees the fault too.
GET /v1/models answers a valid list (except mode html200 / nonopenai); GET /metrics answers 404.
Prints "PORT <n>" on stdout once listening.
"""

import argparse
import asyncio
import contextlib
import gzip
import json
import socket
import struct
import time

MODEL = "bad-model"
HDRLOG = None
LAST_AUTH = ""
POSTS = 0


def ev(content=None, finish=None, usage=None, role=False):
    delta = {}
    if role:
        delta["role"] = "assistant"
    if content is not None:
        delta["content"] = content
    obj = {
        "id": "x",
        "object": "chat.completion.chunk",
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return obj


def sse(obj, sep=b"\n\n", prefix=b"data: "):
    return prefix + json.dumps(obj).encode() + sep


def good_events(n=8, prompt=10):
    out = [sse(ev(role=True, content=""))]
    for i in range(n):
        out.append(
            sse(
                ev(
                    content=f" w{i}",
                    usage={"prompt_tokens": prompt, "completion_tokens": i + 1, "total_tokens": prompt + i + 1},
                )
            )
        )
    out.append(sse(ev(content="", finish="length")))
    out.append(
        sse(
            {
                "id": "x",
                "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n},
            }
        )
    )
    out.append(b"data: [DONE]\n\n")
    return out


def chunk(b):
    return b"%x\r\n" % len(b) + b + b"\r\n"


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    b"cache-control: no-cache\r\n\r\n"
)


async def send_chunked_events(w, events, delay=0.005):
    w.write(SSE_HEAD)
    for e in events:
        w.write(chunk(e))
        await w.drain()
        await asyncio.sleep(delay)
    w.write(b"0\r\n\r\n")
    await w.drain()


def rst(w):
    sock = w.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    w.transport.abort()


async def plain(w, status, reason, body=b"", ctype=b"application/json", extra=b"", length=True):
    head = b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\n" % (status, reason, ctype) + extra
    if length:
        head += b"content-length: %d\r\n" % len(body)
    w.write(head + b"\r\n" + body)
    await w.drain()


async def fault(mode, w):
    """Answer one POST in `mode`. Returns False when the connection must close afterwards."""
    g = good_events()
    if mode == "ok":
        await send_chunked_events(w, g)
    elif mode == "malformed_sse":
        junk = [
            b"this is not sse\n",
            b"event: message\n",
            b"data\n\n",
            b": comment\n\n",
            b"id: 7\nretry: x\n\n",
            b'data: {"choices": [{"delta": {"content": " a"}}]}\n',
            b"\n\ndata: [DONE]\n\n",
        ]
        await send_chunked_events(w, junk)
    elif mode == "invalid_json":
        await send_chunked_events(w, [*g[:3], b"data: {not json at all\n\n", b'data: {"choices": [}\n\n', *g[3:]])
    elif mode == "json_not_object":
        await send_chunked_events(w, [*g[:3], b"data: [1, 2, 3]\n\n", b'data: "str"\n\n', b"data: null\n\n", *g[3:]])
    elif mode == "junk_usage":
        await send_chunked_events(
            w,
            [
                sse(ev(content=" a", usage="lots")),
                sse(ev(content=" b", usage=[1, 2])),
                sse(ev(content="", finish="stop")),
                b"data: [DONE]\n\n",
            ],
        )
    elif mode == "junk_usage_str_tokens":
        await send_chunked_events(
            w,
            [
                sse(ev(content=" a", usage={"completion_tokens": "one"})),
                sse(ev(content=" b", usage={"completion_tokens": "two"})),
                sse(ev(content="", finish="stop")),
                b"data: [DONE]\n\n",
            ],
        )
    elif mode == "junk_choices":
        await send_chunked_events(
            w,
            [
                b'data: {"choices": ["x"]}\n\n',
                b'data: {"choices": [{"delta": "str"}]}\n\n',
                sse(ev(content="", finish="stop")),
                b"data: [DONE]\n\n",
            ],
        )
    elif mode == "junk_content_type":
        await send_chunked_events(
            w,
            [
                b'data: {"choices": [{"delta": {"content": 5}}]}\n\n',
                b'data: {"choices": [{"delta": {"content": ["x"]}}]}\n\n',
                sse(ev(content="", finish="stop")),
                b"data: [DONE]\n\n",
            ],
        )
    elif mode == "never_ends":
        w.write(SSE_HEAD)
        i = 0
        while True:
            w.write(chunk(sse(ev(content=f" t{i}"))))
            await w.drain()
            i += 1
            await asyncio.sleep(0.02)
    elif mode == "stall_after_3":
        w.write(SSE_HEAD)
        for e in g[:4]:
            w.write(chunk(e))
        await w.drain()
        await asyncio.sleep(10**6)
    elif mode == "stall_head":
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        await w.drain()
        await asyncio.sleep(10**6)
    elif mode == "stall_before_head":
        await asyncio.sleep(10**6)
    elif mode == "reset_mid":
        w.write(SSE_HEAD)
        for e in g[:4]:
            w.write(chunk(e))
        await w.drain()
        await asyncio.sleep(0.05)
        rst(w)
        return False
    elif mode == "close_mid":
        w.write(SSE_HEAD)
        for e in g[:4]:
            w.write(chunk(e))
        await w.drain()
        await asyncio.sleep(0.05)
        w.close()
        return False
    elif mode.startswith("http") and mode[4:7].isdigit():
        code = int(mode[4:7])
        reasons = {429: b"Too Many Requests", 500: b"Internal Server Error", 503: b"Service Unavailable"}
        body = b""
        if mode.endswith("_body"):
            body = json.dumps({"error": {"message": f"synthetic {code}", "type": "x"}}).encode()
        extra = b"retry-after: 1\r\n" if code in (429, 503) else b""
        await plain(w, code, reasons[code], body, extra=extra)
    elif mode == "ok200_nobody":
        await plain(w, 200, b"OK", b"", ctype=b"text/event-stream")
    elif mode == "ok200_close_nobody":
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        await w.drain()
        w.close()
        return False
    elif mode == "ok200_json_nonstream":
        body = json.dumps(
            {
                "id": "x",
                "choices": [{"message": {"role": "assistant", "content": "hi there"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            }
        ).encode()
        await plain(w, 200, b"OK", body)
    elif mode == "gzip":
        data = gzip.compress(b"".join(g))
        w.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        w.write(chunk(data) + b"0\r\n\r\n")
        await w.drain()
    elif mode == "chunk_split":
        # every byte of the chunked framing in its own TCP segment
        w.write(SSE_HEAD)
        await w.drain()
        raw = b"".join(chunk(e) for e in g) + b"0\r\n\r\n"
        for i in range(len(raw)):
            w.write(raw[i : i + 1])
            await w.drain()
            if i % 7 == 0:
                await asyncio.sleep(0.0005)
    elif mode == "chunk_ext":
        w.write(SSE_HEAD)
        for e in g:
            w.write(b"%x;name=value\r\n" % len(e) + e + b"\r\n")
        w.write(b"0\r\nx-trailer: 1\r\n\r\n")
        await w.drain()
    elif mode == "chunk_multi_event":
        # all events in one chunk; chunk boundaries mid-event in the next response variant
        w.write(SSE_HEAD + chunk(b"".join(g)) + b"0\r\n\r\n")
        await w.drain()
    elif mode == "chunk_mid_event":
        raw = b"".join(g)
        w.write(SSE_HEAD)
        for i in range(0, len(raw), 13):
            w.write(chunk(raw[i : i + 13]))
            await w.drain()
        w.write(b"0\r\n\r\n")
        await w.drain()
    elif mode == "huge_chunk":
        filler = [sse(ev(content=" x")) for _ in range(80000)]  # ~8 MB in one chunk
        body = b"".join(filler) + b"".join(g[1:])
        w.write(SSE_HEAD + chunk(body) + b"0\r\n\r\n")
        await w.drain()
    elif mode == "bad_chunk_size":
        w.write(SSE_HEAD + b"zz\r\n" + g[0] + b"\r\n")
        await w.drain()
        w.close()
        return False
    elif mode == "long_line_10mb":
        big = sse(ev(content=" " + "y" * (10 * 1024 * 1024)))
        await send_chunked_events(w, [*g[:2], big, *g[2:]])
    elif mode == "endless_no_newline":
        w.write(SSE_HEAD + chunk(b'data: {"choices": [{"delta": {"content": "'))
        blob = chunk(b"z" * 65536)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:  # 60 s of newline-free data, ~ as fast as the client reads
            w.write(blob)
            await w.drain()
        w.close()
        return False
    elif mode == "data_nospace":
        await send_chunked_events(w, [e.replace(b"data: ", b"data:", 1) for e in g])
    elif mode == "crlf":
        await send_chunked_events(w, [e.replace(b"\n", b"\r\n") for e in g])
    elif mode == "cr_only":
        await send_chunked_events(w, [e.replace(b"\n", b"\r") for e in g])
    elif mode == "no_done":
        # no [DONE] and no finish_reason
        evs = [e for e in g if b"[DONE]" not in e and b'"finish_reason": "length"' not in e]
        await send_chunked_events(w, evs)
    elif mode == "no_done_with_finish":
        await send_chunked_events(w, [e for e in g if b"[DONE]" not in e])
    elif mode == "no_usage":
        evs = (
            [sse(ev(role=True, content=""))]
            + [sse(ev(content=f" w{i}")) for i in range(8)]
            + [sse(ev(content="", finish="length")), b"data: [DONE]\n\n"]
        )
        await send_chunked_events(w, evs)
    elif mode == "error_event":
        await send_chunked_events(w, [*g[:3], b'data: {"error": {"message": "engine overloaded", "code": 503}}\n\n'])
    elif mode == "cl_mismatch":
        body = b"".join(g)
        w.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % (len(body) + 5000)
            + body
        )
        await w.drain()
        await asyncio.sleep(0.05)
        w.close()
        return False
    elif mode == "cl_stall":
        # content-length larger than the body, connection kept open: the client waits for bytes that never come
        body = b"".join(g)
        w.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % (len(body) + 5000)
            + body
        )
        await w.drain()
        await asyncio.sleep(10**6)
    elif mode == "http10_close":
        w.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + b"".join(g))
        await w.drain()
        w.close()
        return False
    elif mode == "huge_headers":
        w.write(b"HTTP/1.1 200 OK\r\n" + b"x-pad: " + b"p" * 100000 + b"\r\n\r\n")
        await w.drain()
        w.close()
        return False
    elif mode == "bad_status_line":
        w.write(b"HTTP/1.1 OK-ish\r\ncontent-length: 0\r\n\r\n")
        await w.drain()
    elif mode == "garbage_response":
        w.write(b"\x00\x01\x02 this is not http at all\r\n\r\n")
        await w.drain()
        w.close()
        return False
    elif mode == "stall_some":
        # every 5th POST stalls forever after 3 tokens; the rest are well-formed
        if POSTS % 5 == 0:
            w.write(SSE_HEAD)
            for e in g[:4]:
                w.write(chunk(e))
            await w.drain()
            await asyncio.sleep(10**6)
        await send_chunked_events(w, g)
    elif mode == "echo_auth_400":
        # a proxy that echoes the request's credentials in its error body
        body = json.dumps({"error": {"message": f"bad request; you sent Authorization: {LAST_AUTH}"}}).encode()
        await plain(w, 400, b"Bad Request", body)
    elif mode == "slow_drip":
        # each token 1.5 s apart: finishes, but slowly (20 tokens = 30 s)
        w.write(SSE_HEAD)
        for i in range(20):
            w.write(chunk(sse(ev(content=f" s{i}"))))
            await w.drain()
            await asyncio.sleep(1.5)
        w.write(chunk(sse(ev(content="", finish="length"))) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await w.drain()
    else:
        raise SystemExit(f"unknown mode {mode}")
    return True


async def handle(r, w, mode, good_first):
    global POSTS
    try:
        while True:
            head = await r.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            hdrs = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                hdrs[k.strip().lower()] = v.strip()
            n = int(hdrs.get("content-length", "0") or 0)
            if n:
                await r.readexactly(n)  # the body is read and dropped
            if HDRLOG:
                with open(HDRLOG, "a") as f:
                    f.write(f"{method} {path} authorization={hdrs.get('authorization')!r}\n")
            if mode in ("html200", "nonopenai"):
                if mode == "html200":
                    await plain(
                        w, 200, b"OK", b"<html><body><h1>Welcome to nginx!</h1></body></html>", ctype=b"text/html"
                    )
                else:
                    await plain(w, 404, b"Not Found", b"<html>404</html>", ctype=b"text/html")
                continue
            if method == "GET" and path.startswith("/v1/models"):
                await plain(
                    w, 200, b"OK", json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
                )
                continue
            if method == "GET":
                await plain(w, 404, b"Not Found", b'{"detail": "Not Found"}')
                continue
            POSTS += 1
            global LAST_AUTH
            LAST_AUTH = hdrs.get("authorization", "")
            m = "ok" if good_first >= POSTS else mode
            keep = await fault(m, w)
            if not keep or hdrs.get("connection", "").lower() == "close":
                w.close()
                return
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        with contextlib.suppress(Exception):
            w.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--good-first", type=int, default=1)
    ap.add_argument(
        "--log-headers", default=None, help="append each request's method, path and Authorization header to this file"
    )
    a = ap.parse_args()
    global HDRLOG
    HDRLOG = a.log_headers
    srv = await asyncio.start_server(
        lambda r, w: handle(r, w, a.mode, a.good_first), "127.0.0.1", a.port, limit=1 << 20
    )
    print("PORT", srv.sockets[0].getsockname()[1], flush=True)
    async with srv:
        await srv.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
