"""A tiny scripted TCP server for the HTTP/1.1 reader: every byte and every split is ours.

Each accepted connection runs the next script from the list: a sequence of steps
  ("request",)        read one request (head + Content-Length body); keeps it in `requests`
  ("send", bytes)     send bytes (TCP_NODELAY, so each send leaves as its own segment)
  ("sleep", seconds)
  ("close",)          close normally (FIN)
  ("reset",)          close with SO_LINGER 0 (RST)
  ("hold",)           keep the connection open until the server stops
Send times are stamped with perf_counter_ns just before each send (same clock as the reader).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

Step = tuple[Any, ...]


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def sse_head(extra: str = "Transfer-Encoding: chunked\r\n") -> bytes:
    return ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + extra + "\r\n").encode()


class RawServer:
    def __init__(self, scripts: list[list[Step]]) -> None:
        self.scripts = list(scripts)
        self.requests: list[bytes] = []
        self.sent_ns: list[int] = []  # perf_counter_ns before each "send" step, in order
        self.connections = 0
        self.closed = 0  # connections the server closed or reset itself ("close"/"reset" steps done)
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._loop, daemon=True)
        self._accept.start()

    def _loop(self) -> None:
        self._sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            script = self.scripts.pop(0) if self.scripts else [("close",)]
            t = threading.Thread(target=self._serve, args=(conn, script), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket, script: list[Step]) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            for step in script:
                op = step[0]
                if op == "request":
                    while b"\r\n\r\n" not in buf:
                        data = conn.recv(65536)
                        if not data:
                            return
                        buf += data
                    head, _, rest = buf.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        k, _, v = line.partition(b":")
                        if k.strip().lower() == b"content-length":
                            length = int(v)
                    while len(rest) < length:
                        rest += conn.recv(65536)
                    self.requests.append(head + b"\r\n\r\n" + rest[:length])
                    buf = rest[length:]
                elif op == "send":
                    self.sent_ns.append(time.perf_counter_ns())
                    conn.sendall(step[1])
                elif op == "sleep":
                    time.sleep(step[1])
                elif op == "close":
                    conn.close()
                    self.closed += 1
                    return
                elif op == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    conn.close()
                    self.closed += 1
                    return
                elif op == "hold":
                    self._stop.wait(30)
            conn.close()
        except OSError:
            pass

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()
        for t in self._threads:
            t.join(timeout=2)

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
