"""An append-only JSON-lines file that ends on a whole line when the disk fills up.

Why: on a full disk the buffered requests.jsonl was cut in the middle of a record, the load
process died on the write error with a traceback it could not write either (load.log was on the
same disk), and `harness run` said "the load process failed before measuring anything" although
23 requests had been recorded (audit R5). Python's buffered file cannot say how much of a failed
flush reached the disk (and flushes again when it is collected), so this file buffers its own
lines and writes them with os.write: on the first failure it knows the file's end, cuts the file
back to its last complete line (freeing the torn one's bytes), and keeps the error for the load
process to report and stop on; later lines are counted, not written.
"""

from __future__ import annotations

import os
from pathlib import Path

#: how far back from the end a last newline is looked for (a line is far smaller)
_TAIL = 1 << 20


class LineFile:
    def __init__(self, path: Path, buffer_bytes: int) -> None:
        """`buffer_bytes` <= 1: every line is written at once (a progress file read live)."""
        self.path = Path(path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._limit = buffer_bytes
        self._pending: list[bytes] = []
        self._size = 0
        self.error: OSError | None = None
        self.dropped = 0  # lines not written: after the error, or lost in the flush that failed

    def write(self, line: str) -> bool:
        """Append one line (ending in a newline); False once the file has failed."""
        if self.error is not None or self._fd is None:
            self.dropped += 1
            return False
        data = line.encode()
        self._pending.append(data)
        self._size += len(data)
        if self._size >= self._limit:
            self.flush()
        return self.error is None

    def flush(self) -> None:
        if not self._pending or self._fd is None:
            return
        lines = len(self._pending)
        view = memoryview(b"".join(self._pending))
        self._pending.clear()
        self._size = 0
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self.dropped += lines
            self._fail(exc)

    def close(self) -> None:
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _fail(self, exc: OSError) -> None:
        self.error = exc
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        cut_to_last_line(self.path)


def cut_to_last_line(path: Path) -> None:
    """Truncate `path` just after its last newline (an empty file when it has none)."""
    if not path.is_file():
        return  # a device or a pipe: nothing to cut (and /dev/full reads zeros forever)
    try:
        with open(path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(0, size - _TAIL)
            f.seek(start)
            cut = f.read(size - start).rfind(b"\n")
            keep = start + cut + 1 if cut >= 0 else start
            if keep < size:
                f.truncate(keep)
    except OSError:
        pass
