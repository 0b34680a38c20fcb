"""Types of the compiled reader, harness/client/_native.c (built at install time; optional).

Keep in step with the C module's method and getter tables: tests/client/test_native_build.py
builds it and tests/client/test_native_reader.py and test_native_scan.py call every entry below.
"""

from collections.abc import Callable
from typing import Any

from harness.client.http_stream import StreamError, StreamResult

READ_SIZE: int
#: the content rule `scan` applies: OpenAI chat (delta.content / reasoning) or completions (text)
KIND_CHAT: int
KIND_COMPLETIONS: int

class Parser:
    """Incremental HTTP/1.1 response parser and stamped reader (the native ResponseParser)."""

    def __init__(
        self, max_line: int = ..., fd: int = ..., kernel: bool = ..., offset_ns: int = ..., expected_events: int = ...
    ) -> None: ...
    def feed(self, data: bytes, stamp_ns: int, /) -> None:
        """One read and its arrival stamp."""
    def eof(self, stamp_ns: int, /) -> None:
        """The peer closed the connection."""
    def read(self) -> bool:
        """One recvmsg of the parser's socket, stamped and fed: whether the response is done;
        StreamError on a failure."""
    @property
    def res(self) -> StreamResult: ...
    @property
    def done(self) -> bool: ...
    @property
    def error(self) -> StreamError | None: ...
    @property
    def status(self) -> int: ...
    @property
    def n_lines(self) -> int: ...

def read_ready(epfd: int, parsers: dict[int, Any], /) -> tuple[list[int], int]:
    """Read every ready stream of the epoll set once: (finished fds, how many were ready)."""

def scan(
    lines: list[tuple[int, bytes]], kind: int, loads: Callable[[bytes], Any], /
) -> (
    tuple[
        list[int],  # chunk_ns
        list[str],  # texts
        list[int | None],  # cumulative usage per chunk
        dict[str, Any] | None,  # usage
        dict[str, Any] | None,  # usage_event: the last event with usage
        bool,  # done
        int | None,  # done_ns
        int | None,  # role_ns
        dict[str, Any] | None,  # last_choice_event
        int,  # coalesced reads
    ]
    | None
):
    """The SSE events' content, usage and end marks (as harness.client.sse's Python loop finds
    them), or None where the Python loop must decide."""
