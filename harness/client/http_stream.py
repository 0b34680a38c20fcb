"""The hot path: a small HTTP/1.1 streaming reader that stamps every read at arrival.

Why our own reader: Locust's `iter_content`/`iter_lines` batch 1 KB and were 40-100 ms off, and
no HTTP library exposes the kernel's receive time. Here each `recvmsg` returns the kernel's
`SO_TIMESTAMPNS` stamp (CLOCK_REALTIME of the last TCP segment the read consumed), converted to
the monotonic `perf_counter_ns` clock with an offset measured at send time. So the client's own
scheduling delay (gevent, GC, other streams) vanishes from TTFT and ITL. Where the OS gives no
stamp (TLS, other platforms) the read is stamped with `perf_counter_ns()` right after it returns,
and the clock used is recorded. Reads that hold several SSE events share one stamp; they are
counted afterwards (content chunks sharing a stamp) so a client that fell behind shows up.

Nothing slow sits between the socket and the stamp: the loop only decodes chunked framing and
keeps `(stamp_ns, line)` for `data:` lines; JSON is decoded after the stream ends.
The module works with plain sockets and with gevent's patched ones (inside Locust).
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

try:  # the compiled reader (harness/client/_native.c, typed in _native.pyi), built at install time where a compiler is
    from harness.client import _native as _native
except ImportError:  # no compiler, no headers, another OS: the pure-Python reader below
    # None where it did not build; every use is behind READER == "native", which choose_reader sets only where it built
    _native = None  # type: ignore[assignment]  # the module or None (see above)

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SCM_TIMESTAMPNS = getattr(socket, "SCM_TIMESTAMPNS", SO_TIMESTAMPNS)
_CMSG_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_TIMESPEC = struct.Struct("@qq")
READ_SIZE = 65536
#: the longest SSE line (and the largest non-SSE body) kept in memory; a server that streams
#: without a newline is cut here (a "malformed" error) instead of growing the client without bound
MAX_LINE_BYTES = 32 << 20

perf_ns = time.perf_counter_ns
wall_ns = time.time_ns

#: which reader reads streams: "native" (the C extension) or "python" (ResponseParser)
READERS = ("native", "python")
#: `HARNESS_READER=python` forces the pure-Python reader (A/B runs); `native` insists on the extension
READER_ENV = "HARNESS_READER"


def native_available() -> bool:
    return _native is not None


def choose_reader(wanted: str | None = None) -> str:
    """The reader this process uses: `wanted` (or $HARNESS_READER), else native where it was built.

    ValueError (with the fix) for an unknown name or native asked for where it was not built."""
    wanted = (wanted if wanted is not None else os.environ.get(READER_ENV, "")).strip().lower() or "auto"
    if wanted == "auto":
        return "native" if _native is not None else "python"
    if wanted not in READERS:
        raise ValueError(f"{READER_ENV}={wanted!r}: choose one of auto, native, python")
    if wanted == "native" and _native is None:
        raise ValueError(
            f"{READER_ENV}=native: the native reader was not built here (harness/client/_native.c; "
            "reinstall with a C compiler and Python headers: pip install -e .), or unset it"
        )
    return wanted


def _initial_reader() -> str:
    try:
        return choose_reader()
    except ValueError:  # load processes report it (use_reader) and stop; anything else reads on
        return "native" if _native is not None else "python"


READER = _initial_reader()


def use_reader(name: str | None = None) -> str:
    """Make `name` (default: $HARNESS_READER, see choose_reader) this process's reader."""
    global READER
    READER = choose_reader(name)
    return READER


class StreamParser(Protocol):
    """What the blocking read loop asks of either reader's parser (ResponseParser, _native.Parser)."""

    @property
    def done(self) -> bool: ...

    @property
    def res(self) -> StreamResult: ...

    def feed(self, data: bytes, stamp: int, /) -> None: ...

    def eof(self, stamp: int, /) -> None: ...


def new_parser(fd: int = -1, kernel: bool = False, offset_ns: int = 0, expected_events: int = 0) -> Any:
    """A response parser of this process's reader. The native one also reads its socket `fd`
    itself (`read()`, `_native.read_ready`); both take `feed(data, stamp)` and `eof(stamp)`."""
    if READER == "native":
        return _native.Parser(MAX_LINE_BYTES, fd, kernel, offset_ns, expected_events)
    return ResponseParser()


class StreamError(Exception):
    """A transport-level failure; `kind` names it for errors_by_kind."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail


@dataclass(slots=True)
class StreamResult:
    status: int = 0
    reason: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    head_ns: int = 0  # arrival of the response head
    lines: list[tuple[int, bytes]] = field(default_factory=list)  # (stamp_ns, b"data: ...")
    body: bytes = b""  # non-SSE body (errors, non-streaming responses)
    end_ns: int = 0
    reads: int = 0
    complete: bool = False  # the body ended cleanly (terminal chunk / full length / [DONE])


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    tls: bool
    base_path: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"target url must look like http://host:port, got {url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        return cls(parts.hostname, port, tls, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.tls else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


class Connection:
    """One keep-alive HTTP/1.1 connection; reopened transparently when the server closed it."""

    def __init__(self, endpoint: Endpoint, timeout_s: float = 600.0, kernel_stamps: bool = True) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.want_kernel = kernel_stamps and not endpoint.tls and _CMSG_SPACE > 0
        self.sock: socket.socket | None = None
        self.kernel = False
        self.requests_on_conn = 0

    def connect(self) -> int:
        """Open the connection if needed; returns the nanoseconds spent connecting (0 if reused)."""
        if self.sock is not None:
            return 0
        t0 = perf_ns()
        ep = self.endpoint
        try:
            sock = socket.create_connection((ep.host, ep.port), timeout=min(self.timeout_s, 30.0))
        except TimeoutError as exc:
            raise StreamError("connect_timeout", str(exc)) from None
        except OSError as exc:
            raise StreamError("connect", exc.strerror or str(exc)) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.kernel = False
        if self.want_kernel:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self.kernel = True
            except OSError:
                self.kernel = False
        if ep.tls:
            ctx = ssl.create_default_context()
            sock = ctx.wrap_socket(sock, server_hostname=ep.host)
        sock.settimeout(self.timeout_s)
        self.sock = sock
        self.requests_on_conn = 0
        return perf_ns() - t0

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None

    # ------------------------------------------------------------------ request
    def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes, deadline_ns: int
    ) -> tuple[int, int, StreamResult]:
        """Send one request and read the whole response, stamping every read.

        Returns (clock offset wall-perf at send, perf_ns stamped right before the send, result).
        A stale keep-alive connection (closed by the server between requests) is retried once.
        """
        for attempt in (0, 1):
            reused = self.sock is not None
            self.connect()
            head = _request_head(method, self.endpoint, path, headers, len(body))
            offset = wall_ns() - perf_ns()
            sent_ns = perf_ns()
            try:
                result = self._exchange(head + body, offset, deadline_ns)
            except StreamError as exc:
                self.close()
                if exc.kind == "stale_connection":
                    if reused and attempt == 0:
                        continue  # the server closed the idle keep-alive connection: retry once
                    raise StreamError("disconnect", exc.detail) from None
                raise
            except OSError as exc:
                self.close()
                if reused and attempt == 0:
                    continue
                raise StreamError("disconnect", exc.strerror or str(exc)) from None
            self.requests_on_conn += 1
            if result.headers.get("connection", "").lower() == "close" or not result.complete:
                self.close()
            return offset, sent_ns, result
        raise StreamError("disconnect", "connection closed twice before a response")

    def _exchange(self, data: bytes, offset_ns: int, deadline_ns: int) -> StreamResult:
        """Write the request and read its response (the reactor's connection overrides this)."""
        sock = self.sock
        assert sock is not None  # request() connected it
        sock.sendall(data)
        return self._read_response(offset_ns, deadline_ns)

    def _read_response(self, offset_ns: int, deadline_ns: int) -> StreamResult:
        sock = self.sock
        assert sock is not None
        recvmsg = sock.recvmsg if self.kernel else None
        recv = sock.recv
        parser: StreamParser = new_parser()
        while not parser.done:
            if perf_ns() > deadline_ns:
                what = (
                    "waiting for the response head"
                    if parser.res.status == 0
                    else "stream not finished before the request timeout"
                )
                raise StreamError("timeout", what)
            data, stamp = _read(recvmsg, recv, offset_ns)
            if data:
                parser.feed(data, stamp)
            else:
                parser.eof(stamp)
        return parser.res


def _parse_head(res: StreamResult, head: bytes) -> tuple[bool, int | None, bool]:
    """Status, reason and headers into `res`; returns (chunked, content length, SSE).

    Shared by both readers (the native one calls it once per response), so they read heads alike."""
    lines = head.split(b"\r\n")
    try:
        _version, status, *reason = lines[0].split(b" ", 2)
        res.status = int(status)
    except ValueError:
        raise StreamError("malformed", f"bad status line {lines[0][:80]!r}") from None
    res.reason = reason[0].decode("latin-1") if reason else ""
    hdrs = res.headers
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        hdrs[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    chunked = "chunked" in hdrs.get("transfer-encoding", "").lower()
    length: int | None = None
    if "content-length" in hdrs and not chunked:
        try:
            length = int(hdrs["content-length"])
        except ValueError:
            raise StreamError("malformed", f"bad content-length {hdrs['content-length'][:20]!r}") from None
    return chunked, length, "text/event-stream" in hdrs.get("content-type", "")


def _chunk_size(size_field: bytes) -> int:
    """A chunk-size line's value (extensions after `;` ignored); shared by both readers."""
    try:
        return int(size_field, 16)
    except ValueError:
        size_field = size_field.split(b";", 1)[0].strip()  # chunk extensions
        try:
            return int(size_field, 16)
        except ValueError:
            raise StreamError("malformed", f"bad chunk size {size_field[:20]!r}") from None


class ResponseParser:
    """Incremental HTTP/1.1 response parser: feed it reads with their stamps.

    Handles the head, chunked transfer encoding (trailer consumed, so a keep-alive connection
    starts clean), content-length and close-delimited bodies. For `text/event-stream` it keeps
    `(stamp, line)` for every `data:` line, stamped with the read that completed the line;
    other bodies are kept whole. The same parser serves the blocking reader above and the
    gevent reactor (harness/load/reactor.py), so framing behaves identically in both.
    """

    __slots__ = (
        "_body",
        "_body_bytes",
        "_buf",
        "_chunked",
        "_head_done",
        "_length",
        "_need",
        "_pending",
        "_received",
        "_sse",
        "_trailer",
        "done",
        "res",
    )

    def __init__(self) -> None:
        self.res = StreamResult()
        self.done = False
        self._buf = b""
        self._head_done = False
        self._chunked = False
        self._length: int | None = None
        self._received = 0
        self._sse = False
        self._pending = b""  # decoded body bytes not yet ending in a newline
        self._need = -1  # bytes left in the current chunk; -1 = expecting a size line
        self._trailer = False  # after the last chunk: trailer lines up to an empty line
        self._body: list[bytes] = []
        self._body_bytes = 0

    def feed(self, data: bytes, stamp: int) -> None:
        res = self.res
        res.reads += 1
        res.end_ns = stamp
        if not self._head_done:
            self._buf += data
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > 65536:
                    raise StreamError("malformed", "response head larger than 64 KiB")
                return
            res.head_ns = stamp
            head, data = self._buf[:end], self._buf[end + 4 :]
            self._buf = b""
            self._parse_head(head)
            self._head_done = True
            if not data:
                self._check_length()
                return
        if self._chunked:
            self._feed_chunked(data, stamp)
        else:
            self._feed_plain(data, stamp)

    def eof(self, stamp: int) -> None:
        """The peer closed the connection."""
        res = self.res
        if not self._head_done:
            if res.reads == 0:
                raise StreamError("stale_connection", "closed before the response head")
            raise StreamError("disconnect", "closed inside the response head")
        if self._chunked:
            res.complete = self._trailer  # closed after the last chunk: complete; mid-body: not
        else:
            res.complete = self._length is None  # close-delimited body ends at EOF
        self._finish(stamp)

    # ---------------------------------------------------------------- internals
    def _parse_head(self, head: bytes) -> None:
        self._chunked, self._length, self._sse = _parse_head(self.res, head)

    def _lines(self, stamp: int) -> None:
        if b"\r" in self._pending:
            # the SSE spec allows CRLF, LF and a lone CR as line ends; a CRLF split across two
            # reads gives one extra empty line, which only ends an event
            self._pending = self._pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" in self._pending:
            *complete, self._pending = self._pending.split(b"\n")
            lines = self.res.lines
            for line in complete:
                if line.startswith(b"data:"):
                    lines.append((stamp, line))
        if len(self._pending) > MAX_LINE_BYTES:
            raise StreamError("malformed", f"SSE line longer than {MAX_LINE_BYTES >> 20} MiB without a line end; cut")

    def _check_length(self) -> None:
        if self._length is not None and self._received >= self._length:
            self.res.complete = True
            self._finish(self.res.end_ns)

    def _feed_plain(self, data: bytes, stamp: int) -> None:
        self._received += len(data)
        if self._sse:
            self._pending += data
            self._lines(stamp)
        else:
            self._keep_body(data)
        self._check_length()

    def _keep_body(self, data: bytes) -> None:
        self._body.append(data)
        self._body_bytes += len(data)
        if self._body_bytes > MAX_LINE_BYTES:
            raise StreamError("malformed", f"non-streamed body larger than {MAX_LINE_BYTES >> 20} MiB; cut")

    def _feed_chunked(self, data: bytes, stamp: int) -> None:
        if self._buf:
            data = self._buf + data
            self._buf = b""
        pos = 0
        size = len(data)
        sse = self._sse
        while pos < size:
            if self._trailer:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    break
                empty = eol == pos
                pos = eol + 2
                if empty:
                    self.res.complete = True
                    break
                continue
            if self._need < 0:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    break  # partial size line: wait for more
                size_field = data[pos:eol]
                pos = eol + 2
                if not size_field:  # the CRLF that ends a chunk
                    continue
                need = _chunk_size(size_field)
                end = pos + need
                if (
                    sse
                    and need > 2
                    and not self._pending
                    and end + 2 <= size
                    and data[end - 2 : end] == b"\n\n"
                    and data.startswith(b"data:", pos)
                    and data.find(b"\n", pos, end) == end - 2
                ):
                    # fast path, the common case: one whole chunk holding exactly one SSE event
                    self.res.lines.append((stamp, data[pos : end - 2]))
                    pos = end
                    continue
                self._need = need
                if need == 0:
                    self._trailer = True  # last chunk; the body ends at the empty line after it
                continue
            take = min(self._need, size - pos)
            piece = data[pos : pos + take]
            pos += take
            self._need -= take
            if self._need == 0:
                self._need = -1
            if sse:
                self._pending += piece
            else:
                self._keep_body(piece)
        if pos < size and not self.res.complete:
            self._buf = data[pos:]
        if sse and self._pending:
            self._lines(stamp)
        if self.res.complete:
            self._finish(stamp)

    def _finish(self, stamp: int) -> None:
        if self._pending.startswith(b"data:"):
            self.res.lines.append((stamp, self._pending))
            self._pending = b""
        self.res.body = b"".join(self._body)
        self.res.end_ns = stamp
        self.done = True


_KEEPER: socket.socket | None = None


def warm_kernel_timestamps() -> bool:
    """Ask the kernel for receive stamps once, early, and keep asking for the process's life.

    Linux enables receive timestamping for all sockets through a deferred static key when the
    first socket asks; until the deferred work has run, reads are stamped at recv time (a user
    clock stamp labelled kernel). Holding one socket with SO_TIMESTAMPNS from process start keeps
    the key on, so the first measured requests get true arrival stamps too.
    """
    global _KEEPER
    if _KEEPER is None and _CMSG_SPACE > 0:
        try:
            keeper = socket.socket()
            keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            _KEEPER = keeper
        except OSError:
            return False
    return _KEEPER is not None


#: socket.recvmsg(bufsize, ancbufsize) -> (data, ancillary data (level, type, payload), flags, address)
RecvMsg = Callable[[int, int], tuple[bytes, list[tuple[int, int, bytes]], int, Any]]


def _read(recvmsg: RecvMsg | None, recv: Callable[[int], bytes], offset_ns: int) -> tuple[bytes, int]:
    """One read and its arrival stamp on the perf_counter_ns clock: `recvmsg` (with the kernel's
    receive stamp) where the socket stamps reads, else `recv` stamped right after it returns."""
    try:
        if recvmsg is not None:
            data, ancdata, _flags, _addr = recvmsg(READ_SIZE, _CMSG_SPACE)
            now = perf_ns()
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(payload) >= 16:
                    sec, nsec = _TIMESPEC.unpack_from(payload)
                    stamp = sec * 1_000_000_000 + nsec - offset_ns
                    # a stamp can never be later than "now"; guard against clock steps
                    return data, stamp if stamp <= now else now
            return data, now
        data = recv(READ_SIZE)
        return data, perf_ns()
    except TimeoutError:
        raise StreamError("timeout", "no data from the server within the read timeout") from None
    except ConnectionResetError as exc:
        raise StreamError("disconnect", exc.strerror or "connection reset") from None


def _request_head(method: str, ep: Endpoint, path: str, headers: dict[str, str], length: int) -> bytes:
    lines = [f"{method} {ep.base_path}{path} HTTP/1.1", f"Host: {ep.host_header}"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
