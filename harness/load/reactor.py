"""The load process's read loop: one epoll reactor reads every open stream.

Why: under gevent, reading each stream from its own greenlet costs a hub wake-up, two greenlet
switches and a failed `recv` per SSE event (~15 µs); when a batched engine step delivers a
token to hundreds of streams at once, the last stream is read milliseconds late and events
start to coalesce. Here one greenlet asks epoll which sockets are readable and reads each once,
back to back (one `recvmsg` per ready socket, stamped by the kernel), then yields. The user
greenlets only connect, send, and wait for their response to complete.

Imports gevent: only load processes (harness.load) import this module. TLS targets fall back to
the per-greenlet blocking reader (harness.client.http_stream.Connection).
"""

from __future__ import annotations

import contextlib
import errno
import socket
import struct
from typing import Any

import gevent
import gevent.event
import gevent.socket
from gevent import monkey

from harness.client import http_stream
from harness.client.http_stream import (
    _CMSG_SPACE,
    READ_SIZE,
    SCM_TIMESTAMPNS,
    SO_TIMESTAMPNS,
    Connection,
    Endpoint,
    ResponseParser,
    StreamError,
    StreamResult,
    new_parser,
    perf_ns,
)

# gevent removes select.epoll when it patches, and wraps socket.socket; the reactor needs both raw
_epoll_cls = monkey.get_original("select", "epoll")
_raw_socket = monkey.get_original("socket", "socket")
# gevent resolves names in a thread pool whose idle worker thread then polls for the rest of the
# run; targets are resolved once each, so the blocking resolver is cheaper
_blocking_getaddrinfo = monkey.get_original("socket", "getaddrinfo")
_EPOLLIN = 0x001
_TIMESPEC = struct.Struct("@qq")
_SOL_SOCKET = socket.SOL_SOCKET


class _Pending:
    """One response being read: its socket, parser and completion event."""

    __slots__ = ("error", "event", "kernel", "offset_ns", "parser", "sock")

    def __init__(
        self, sock: socket.socket, kernel: bool, offset_ns: int, native: bool, expected_events: int = 0
    ) -> None:
        self.sock = sock
        self.kernel = kernel
        self.offset_ns = offset_ns
        # the native parser reads its socket itself (recvmsg, stamp, framing in C); its `error` is
        # read by the native loop only
        self.parser: Any = new_parser(sock.fileno(), kernel, offset_ns, expected_events) if native else ResponseParser()
        self.event = gevent.event.Event()
        self.error: StreamError | None = None


class Reactor:
    """epoll over every in-flight response of this process, read by one greenlet.

    With the native reader (harness/client/_native.c) one C call reads a whole epoll batch:
    every ready socket once, stamped and framed, with no Python object made per event; the
    loop here only wakes the requests that finished. The pure-Python reader is the fallback.
    The mode is fixed when the reactor starts (the process's reader, http_stream.READER).
    """

    def __init__(self) -> None:
        self.ep = _epoll_cls()
        self.pending: dict[int, _Pending] = {}
        self.native = http_stream.READER == "native"
        self.parsers: dict[int, object] = {}  # fd -> native parser (read_ready's table)
        self.batches = 0
        self.reads = 0
        self._greenlet = gevent.spawn(self._loop_native if self.native else self._loop)

    def close(self) -> None:
        self._greenlet.kill(block=False)
        self.ep.close()

    def add(self, fd: int, p: _Pending) -> None:
        self.pending[fd] = p
        if self.native:
            self.parsers[fd] = p.parser
        self.ep.register(fd, _EPOLLIN)

    def remove(self, fd: int) -> None:
        if self.pending.pop(fd, None) is not None:
            self.parsers.pop(fd, None)
            with contextlib.suppress(OSError, ValueError):
                self.ep.unregister(fd)

    def _loop_native(self) -> None:
        read_ready = http_stream._native.read_ready
        epfd = self.ep.fileno()
        pending = self.pending
        parsers = self.parsers
        hub = gevent.get_hub()
        watcher = hub.loop.io(epfd, 1)
        while True:
            finished, ready = read_ready(epfd, parsers)
            if not ready:
                hub.wait(watcher)
                continue
            self.batches += 1
            self.reads += ready
            for fd in finished:
                p = pending.get(fd)
                if p is not None:
                    p.error = p.parser.error
                    self.remove(fd)
                    p.event.set()
            gevent.sleep(0)

    def _loop(self) -> None:
        poll = self.ep.poll
        pending = self.pending
        hub = gevent.get_hub()
        watcher = hub.loop.io(self.ep.fileno(), 1)  # one persistent watcher, not one per wait
        while True:
            events = poll(0, 4096)
            if not events:
                hub.wait(watcher)  # park until any registered stream is readable
                continue
            self.batches += 1
            for fd, _mask in events:
                p = pending.get(fd)
                if p is not None and self._read(p):
                    self.remove(fd)
                    p.event.set()
            self.reads += len(events)
            gevent.sleep(0)  # let senders and the finisher run between batches

    @staticmethod
    def _read(p: _Pending) -> bool:
        """One read for a readable socket; True when the response is complete or failed."""
        try:
            if p.kernel:
                data, ancdata, _flags, _addr = p.sock.recvmsg(READ_SIZE, _CMSG_SPACE)
                now = perf_ns()
                stamp = now
                for level, kind, payload in ancdata:
                    if level == _SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(payload) >= 16:
                        sec, nsec = _TIMESPEC.unpack_from(payload)
                        stamp = sec * 1_000_000_000 + nsec - p.offset_ns
                        if stamp > now:
                            stamp = now
                        break
            else:
                data = p.sock.recv(READ_SIZE)
                stamp = perf_ns()
        except BlockingIOError:
            return False
        except OSError as exc:
            p.error = StreamError("disconnect", exc.strerror or str(exc))
            return True
        try:
            if data:
                p.parser.feed(data, stamp)
            else:
                p.parser.eof(stamp)
        except StreamError as exc:
            p.error = exc
            return True
        return p.parser.done


_REACTOR: Reactor | None = None


def reactor() -> Reactor:
    global _REACTOR
    r = _REACTOR
    if r is None or (r.native != (http_stream.READER == "native") and not r.pending):
        if r is not None:  # a later run in this process (web UI, worker) chose the other reader
            r.close()
        r = _REACTOR = Reactor()
    return r


_RESOLVED: dict[tuple[str, int], tuple[int, int, tuple]] = {}


def _resolve(host: str, port: int) -> tuple[int, int, tuple]:
    """getaddrinfo once per target (gevent resolves in a thread pool; not per connection)."""
    key = (host, port)
    hit = _RESOLVED.get(key)
    if hit is None:
        try:
            infos = _blocking_getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise StreamError("connect", f"cannot resolve {host}: {exc}") from None
        family, _type, proto, _name, addr = infos[0]
        hit = _RESOLVED[key] = (family, proto, addr)
    return hit


class ReactorConnection(Connection):
    """A keep-alive HTTP/1.1 connection whose responses the process's reactor reads.

    Request flow, stale keep-alive retry and error kinds are Connection's; this class only opens
    a raw non-blocking socket and hands the read to the reactor.
    """

    def __init__(self, endpoint: Endpoint, timeout_s: float = 600.0, kernel_stamps: bool = True) -> None:
        if endpoint.tls:
            raise ValueError("ReactorConnection does not do TLS; use http_stream.Connection")
        super().__init__(endpoint, timeout_s, kernel_stamps)
        #: SSE events the next response should hold (max_tokens + a few): the native reader
        #: sizes its stamp arrays once instead of growing them
        self.expected_events = 0

    def connect(self) -> int:
        if self.sock is not None:
            return 0
        t0 = perf_ns()
        ep = self.endpoint
        family, proto, addr = _resolve(ep.host, ep.port)
        sock = _raw_socket(family, socket.SOCK_STREAM, proto)
        sock.setblocking(False)
        err = sock.connect_ex(addr)
        if err in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
            try:
                gevent.socket.wait_write(sock.fileno(), timeout=min(self.timeout_s, 30.0))
            except gevent.socket.timeout:
                sock.close()
                raise StreamError("connect_timeout", f"no connection to {ep.host}:{ep.port} within 30 s") from None
            err = sock.getsockopt(_SOL_SOCKET, socket.SO_ERROR)
        if err not in (0, errno.EISCONN):
            sock.close()
            raise StreamError("connect", errno.errorcode.get(err, str(err)) + f" ({ep.host}:{ep.port})")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.kernel = False
        if self.want_kernel:
            try:
                sock.setsockopt(_SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self.kernel = True
            except OSError:
                self.kernel = False
        self.sock = sock
        self.requests_on_conn = 0
        return perf_ns() - t0

    def close(self) -> None:
        if self.sock is not None:
            reactor().remove(self.sock.fileno())
        super().close()

    def _send(self, data: bytes) -> None:
        sock = self.sock
        assert sock is not None  # request() connected it
        view = memoryview(data)
        while view:
            try:
                n = sock.send(view)
            except BlockingIOError:
                gevent.socket.wait_write(sock.fileno(), timeout=self.timeout_s)
                continue
            view = view[n:]

    def _exchange(self, data: bytes, offset_ns: int, deadline_ns: int) -> StreamResult:
        r = reactor()
        sock = self.sock
        assert sock is not None  # request() connected it
        fd = sock.fileno()
        p = _Pending(sock, self.kernel, offset_ns, r.native, self.expected_events)
        r.add(fd, p)
        try:
            self._send(data)
        except OSError:
            r.remove(fd)
            raise
        if not p.event.wait(max((deadline_ns - perf_ns()) / 1e9, 0.0)):
            r.remove(fd)
            what = (
                "waiting for the response head"
                if p.parser.res.status == 0
                else "stream not finished before the request timeout"
            )
            raise StreamError("timeout", what)
        if p.error is not None:
            raise p.error
        return p.parser.res
