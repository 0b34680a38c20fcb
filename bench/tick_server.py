"""A ground-truth SSE server for client-fidelity benchmarks (not part of the product).

Behaves like a batched decoding engine: a ticker fires every ITL; on each tick every stream that
is due gets one token, written as one SSE event (one chunked-encoding chunk) with a single
`send`, and the time that send returned (perf_counter_ns: CLOCK_MONOTONIC, comparable across
processes) is recorded. A stream's first token goes out on the first tick at least TTFT after
the request arrived. Per request it logs: X-Request-Id, the request's arrival (the kernel's
receive stamp of the segment that completed it, SO_TIMESTAMPNS, so the server's own scheduling
delay never enters the truth), and every token write. Chat-completions format with a role chunk,
usage chunk and [DONE], like vLLM.

Never the limit: `--workers N` serves from N processes on one port (SO_REUSEPORT: the kernel
spreads connections over them), each with its own epoll loop; they tick on one shared schedule
(ticks at the same CLOCK_MONOTONIC instants in every process, like one engine's steps). Each
process writes its own truth; the parent merges them into `--trace` when stopped. The trace ends
with one line per process: its ticks, how late they fired, and how long a tick's writes took.

    python bench/tick_server.py --port 8123 --ttft-ms 30 --itl-ms 10 --trace /tmp/trace.jsonl
    python bench/tick_server.py --port 8123 --workers 4 --trace /tmp/trace.jsonl   # 4,096 streams
Pin it away from the client (taskset -c 0 or -c 0-3). SIGTERM/SIGINT flush the trace and exit.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import multiprocessing
import os
import select
import signal
import socket
import struct
import sys
import time
from array import array
from multiprocessing.synchronize import Event as EventLike
from pathlib import Path

perf = time.perf_counter_ns
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SCM_TIMESTAMPNS = getattr(socket, "SCM_TIMESTAMPNS", SO_TIMESTAMPNS)
CMSG = socket.CMSG_SPACE(16)
TIMESPEC = struct.Struct("@qq")

ROLE = b'data: {"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
TOKEN = b'data: {"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n'
LAST = b'data: {"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":"length"}]}\n\n'


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


C_ROLE, C_TOKEN, C_LAST = chunk(ROLE), chunk(TOKEN), chunk(LAST)
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    b"Cache-Control: no-cache\r\n\r\n"
)
MODELS = b'{"data":[{"id":"tick","max_model_len":100000}]}'


def tail(total: int) -> bytes:
    """The last token, then usage, [DONE] and the terminal chunk: one write, one truth stamp."""
    usage = (
        b'data: {"id":"b","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":%d,"total_tokens":%d}}\n\n'
        % (total, total + 7)
    )
    return C_LAST + chunk(usage) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


class Stream:
    __slots__ = ("conn", "due", "left", "received", "rid", "total", "writes")

    def __init__(self, conn: Conn, rid: str, received: int, due: int, total: int) -> None:
        self.conn = conn
        self.rid = rid
        self.received = received
        self.due = due
        self.left = total
        self.total = total
        self.writes = array("q")


class Conn:
    __slots__ = ("buf", "fd", "out", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.buf = b""
        self.out = b""  # bytes a full socket buffer did not take yet


class Worker:
    """One serving process: accept, read requests (kernel-stamped), write tokens on the ticks."""

    def __init__(
        self,
        listener: socket.socket,
        ttft_ns: int,
        itl_ns: int,
        default_tokens: int,
        epoch: int,
        keep_truth: bool = True,
    ) -> None:
        self.listener = listener
        # without --trace nobody reads the truth: an hour at 100 req/s would hold ~400 MB of it
        self.keep_truth = keep_truth
        self.ttft_ns = ttft_ns
        self.itl_ns = itl_ns
        self.default_tokens = default_tokens
        self.epoch = epoch
        self.ep = select.epoll()
        self.conns: dict[int, Conn] = {}
        self.streams: list[Stream] = []
        self.finished: list[tuple[str, int, array]] = []
        self.late_ns = array("q")
        self.tick_ns = array("q")  # how long each tick's writes took
        self.stop = False
        listener.setblocking(False)
        self.ep.register(listener.fileno(), select.EPOLLIN)

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        k = (perf() - self.epoch) // self.itl_ns + 1
        while not self.stop:
            next_tick = self.epoch + k * self.itl_ns
            wait = (next_tick - perf()) / 1e9
            if wait > 0:  # epoll waits in whole ms: a tick fires up to 1 ms late (reported; the
                self._poll(min(wait, 0.05))  # truth is when each write happened, not the tick)
                continue
            now = perf()
            self.late_ns.append(now - next_tick)
            self._poll(0)  # requests that arrived just now still make this tick's cut-off
            self._tick(now)
            self.tick_ns.append(perf() - now)
            # a tick that overran skips the ticks it missed (an engine's step took longer)
            k = max(k + 1, (perf() - self.epoch) // self.itl_ns + 1)

    def _poll(self, timeout: float) -> None:
        try:
            events = self.ep.poll(timeout)
        except InterruptedError:
            return
        for fd, mask in events:
            if fd == self.listener.fileno():
                self._accept()
            else:
                conn = self.conns.get(fd)
                if conn is not None:
                    if mask & select.EPOLLOUT:
                        self._flush(conn)
                    if mask & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
                        self._read(conn)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    print(f"tick_server: out of file descriptors ({exc})", file=sys.stderr, flush=True)
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            conn = Conn(sock)
            self.conns[conn.fd] = conn
            self.ep.register(conn.fd, select.EPOLLIN)

    def _close(self, conn: Conn) -> None:
        self.conns.pop(conn.fd, None)
        with contextlib.suppress(OSError, ValueError):
            self.ep.unregister(conn.fd)
        conn.sock.close()

    def _read(self, conn: Conn) -> None:
        try:
            data, anc, _flags, _addr = conn.sock.recvmsg(65536, CMSG)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        now = perf()
        if not data:
            self._close(conn)
            return
        stamp = now
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(payload) >= 16:
                sec, nsec = TIMESPEC.unpack_from(payload)
                offset = time.time_ns() - perf()  # CLOCK_REALTIME stamp -> perf_counter_ns
                stamp = min(sec * 1_000_000_000 + nsec - offset, now)
        conn.buf += data
        self._requests(conn, stamp)

    def _requests(self, conn: Conn, stamp: int) -> None:
        """Every complete request in the buffer; its arrival is the read that completed it."""
        while True:
            buf = conn.buf
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = buf[:end].decode("latin-1")
            length, rid = 0, ""
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                lname = name.strip().lower()
                if lname == "content-length":
                    length = int(value)
                elif lname == "x-request-id":
                    rid = value.strip()
            if len(buf) < end + 4 + length:
                return
            body = buf[end + 4 : end + 4 + length]
            conn.buf = buf[end + 4 + length :]
            path = head.split(" ", 2)[1]
            if not path.startswith("/v1/"):
                self._send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                continue
            if path == "/v1/models":
                self._send(
                    conn,
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(MODELS), MODELS),
                )
                continue
            try:
                tokens = int(json.loads(body).get("max_tokens") or self.default_tokens)
            except ValueError:
                tokens = self.default_tokens
            self._send(conn, HEAD + C_ROLE)
            self.streams.append(Stream(conn, rid, stamp, stamp + self.ttft_ns, max(1, tokens)))

    def _send(self, conn: Conn, data: bytes) -> bool:
        """Write `data` (after anything still queued); True when the kernel took all of it."""
        if conn.out:
            conn.out += data
            return False
        try:
            n = conn.sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            return False
        if n < len(data):
            conn.out = data[n:]
            self.ep.modify(conn.fd, select.EPOLLIN | select.EPOLLOUT)
            return False
        return True

    def _flush(self, conn: Conn) -> None:
        data, conn.out = conn.out, b""
        if data and self._send(conn, data):
            self.ep.modify(conn.fd, select.EPOLLIN)

    def _tick(self, now: int) -> None:
        keep = []
        finished = self.finished
        for s in self.streams:
            if s.due > now:
                keep.append(s)
                continue
            if s.conn.fd not in self.conns:
                continue  # the client went away
            s.left -= 1
            last = s.left == 0
            self._send(s.conn, tail(s.total) if last else C_TOKEN)
            s.writes.append(perf())
            if last:
                if self.keep_truth:
                    finished.append((s.rid, s.received, s.writes))
            else:
                keep.append(s)
        self.streams = keep

    # ------------------------------------------------------------------ the truth
    def dump(self, path: Path, worker: int) -> None:
        with open(path, "w") as f:
            for rid, received, writes in self.finished:
                f.write(json.dumps({"request_id": rid, "received_ns": received, "writes": writes.tolist()}) + "\n")
            late, took = sorted(self.late_ns), sorted(self.tick_ns)
            if late:
                f.write(
                    json.dumps(
                        {
                            "worker": worker,
                            "ticks": len(late),
                            "ticker_late_p50_ns": late[len(late) // 2],
                            "ticker_late_p99_ns": late[int(len(late) * 0.99)],
                            "tick_writes_p99_ns": took[int(len(took) * 0.99)],
                            "requests": len(self.finished),
                        }
                    )
                    + "\n"
                )


def listener(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(8192)
    return sock


def serve(args: argparse.Namespace, worker: int, epoch: int, ready: EventLike) -> None:
    w = Worker(
        listener(args.host, args.port),
        int(args.ttft_ms * 1e6),
        int(args.itl_ms * 1e6),
        args.tokens,
        epoch,
        keep_truth=bool(args.trace),
    )

    def _stop(*_a: object) -> None:
        w.stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    ready.set()
    w.run()
    if args.trace:
        w.dump(Path(f"{args.trace}.w{worker}"), worker)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8123)
    p.add_argument("--ttft-ms", type=float, default=30.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--workers", type=int, default=1, help="serving processes on the one port (SO_REUSEPORT)")
    p.add_argument("--trace", help="JSON lines: every request's arrival and writes, then a line per process")
    args = p.parse_args()
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    epoch = perf()
    ctx = multiprocessing.get_context("fork")
    procs, readies = [], []
    for k in range(args.workers):
        ready = ctx.Event()
        proc = ctx.Process(target=serve, args=(args, k, epoch, ready), daemon=True)
        proc.start()
        procs.append(proc)
        readies.append(ready)
    for ready in readies:
        ready.wait(30)
    print(f"ready on {args.host}:{args.port} ({args.workers} process{'es' if args.workers > 1 else ''})", flush=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_a: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_a: stopping.append(1))
    while not stopping and all(proc.is_alive() for proc in procs):
        time.sleep(0.1)
    for proc in procs:
        if proc.pid is not None and proc.is_alive():
            os.kill(proc.pid, signal.SIGTERM)
    for proc in procs:
        proc.join(60)
    if args.trace:
        with open(args.trace, "w") as out:
            for k in range(args.workers):
                part = Path(f"{args.trace}.w{k}")
                if part.exists():
                    out.write(part.read_text())
                    part.unlink()


if __name__ == "__main__":
    main()
