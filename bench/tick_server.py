"""A ground-truth SSE server for client-fidelity benchmarks (not part of the product).

Behaves like a batched decoding engine: a global ticker fires every ITL; on each tick every
stream that is due gets one token, written as one SSE event (one chunked-encoding chunk) with a
single transport write, and the write time (perf_counter_ns, CLOCK_MONOTONIC, comparable across
processes) is recorded. A stream's first token goes out on the first tick at least TTFT after the
request arrived. Per request it logs: X-Request-Id, receipt time, every token write time.
Chat-completions format with a role chunk, usage chunk and [DONE], like vLLM.

    python bench/tick_server.py --port 8123 --ttft-ms 30 --itl-ms 10 --trace /tmp/trace.jsonl
Run it pinned to its own core (taskset -c 0). SIGTERM/SIGINT flush the trace and exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import time

perf = time.perf_counter_ns

ROLE = b'data: {"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
TOKEN = b'data: {"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n'
LAST = b'data: {"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":"length"}]}\n\n'


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


C_ROLE, C_TOKEN, C_LAST = chunk(ROLE), chunk(TOKEN), chunk(LAST)
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        b"Cache-Control: no-cache\r\n\r\n")


class Stream:
    __slots__ = ("transport", "rid", "received", "due", "left", "total", "writes")

    def __init__(self, transport, rid, received, due, total):  # type: ignore[no-untyped-def]
        self.transport = transport
        self.rid = rid
        self.received = received
        self.due = due
        self.left = total
        self.total = total
        self.writes: list[int] = []


class Server:
    def __init__(self, ttft_ns: int, itl_ns: int, default_tokens: int) -> None:
        self.ttft_ns = ttft_ns
        self.itl_ns = itl_ns
        self.default_tokens = default_tokens
        self.streams: list[Stream] = []
        self.finished: list[dict] = []
        self.late_ns: list[int] = []

    async def ticker(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = perf()
        while True:
            next_tick += self.itl_ns
            delay = (next_tick - perf()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            now = perf()
            self.late_ns.append(now - next_tick)
            keep = []
            for s in self.streams:
                if s.due > now:
                    keep.append(s)
                    continue
                if s.transport.is_closing():
                    continue
                s.left -= 1
                s.transport.write(C_LAST if s.left == 0 else C_TOKEN)
                s.writes.append(perf())
                if s.left == 0:
                    usage = {"prompt_tokens": 7, "completion_tokens": s.total, "total_tokens": s.total + 7}
                    tail = b'data: {"id":"b","choices":[],"usage":' + json.dumps(usage).encode() + b"}\n\n"
                    s.transport.write(chunk(tail) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
                    self.finished.append({"request_id": s.rid, "received_ns": s.received, "writes": s.writes})
                else:
                    keep.append(s)
            self.streams = keep
            if loop is None:
                break


class Proto(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:  # type: ignore[no-untyped-def]
        self.transport = transport
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        received = perf()
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            rid = ""
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                lname = name.strip().lower()
                if lname == "content-length":
                    length = int(value)
                elif lname == "x-request-id":
                    rid = value.strip()
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            path = head.split(" ", 2)[1]
            if not path.startswith("/v1/"):
                self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")  # type: ignore[union-attr]
                continue
            if path == "/v1/models":
                payload = b'{"data":[{"id":"tick","max_model_len":100000}]}'
                self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))  # type: ignore[union-attr]
                continue
            try:
                tokens = int(json.loads(body).get("max_tokens") or self.server.default_tokens)
            except ValueError:
                tokens = self.server.default_tokens
            self.transport.write(HEAD + C_ROLE)  # type: ignore[union-attr]
            srv = self.server
            srv.streams.append(Stream(self.transport, rid, received, received + srv.ttft_ns, tokens))


async def main_async(args: argparse.Namespace) -> None:
    server = Server(int(args.ttft_ms * 1e6), int(args.itl_ms * 1e6), args.tokens)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: Proto(server), args.host, args.port, backlog=4096)
    ticker = asyncio.ensure_future(server.ticker())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"ready on {args.host}:{args.port}", flush=True)
    await stop.wait()
    ticker.cancel()
    srv.close()
    if args.trace:
        with open(args.trace, "w") as f:
            for rec in server.finished:
                f.write(json.dumps(rec) + "\n")
            late = sorted(server.late_ns)
            if late:
                f.write(json.dumps({"ticker_late_p50_ns": late[len(late) // 2],
                                    "ticker_late_p99_ns": late[int(len(late) * 0.99)]}) + "\n")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8123)
    p.add_argument("--ttft-ms", type=float, default=30.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--trace")
    args = p.parse_args()
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
