"""Wait for a condition instead of sleeping a guessed time.

A fixed `time.sleep(0.3)` "so a scrape happens" is too short on a busy box (the test fails for no
reason) and too long on a quiet one (the suite is slow for no reason). The tests wait for the
thing itself: a file appearing or growing, a port answering, a log line, a counter reaching a
value, a process exiting. The timeout is a hang guard, far above what the condition needs on a
loaded 2-core box; it is never the figure under test (timing figures belong in bench/).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: far above what any condition here needs; a test that hits it has hung, not run slowly
HANG_S = 60.0


def wait_until(
    condition: Callable[[], T],
    what: str,
    *,
    timeout_s: float = HANG_S,
    interval_s: float = 0.01,
    details: Callable[[], str] | None = None,
) -> T:
    """Poll `condition` until it returns something truthy and return that; AssertionError naming
    `what` (and `details()`, e.g. a log tail) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f"\n{details()}" if details else ""
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{extra}")
        time.sleep(interval_s)


def lines_of(path: Path) -> list[str]:
    """The complete lines of a file another process or thread is appending to ([] before it exists)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]


def wait_for_lines(path: Path, count: int, what: str | None = None, **kw) -> list[str]:
    """Wait until `path` holds at least `count` complete lines; return them."""
    return wait_until(
        lambda: (lambda ls: ls if len(ls) >= count else None)(lines_of(path)),
        what or f"{count} lines in {path.name}",
        **kw,
    )


def wait_for_text(path: Path, text: str, **kw) -> str:
    """Wait until `path` contains `text` (a log line, a mark); return the file's text."""

    def found() -> str | None:
        try:
            body = path.read_text(errors="replace")
        except FileNotFoundError:
            return None
        return body if text in body else None

    return wait_until(found, f"{text!r} in {path.name}", **kw)


def port_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, proc: subprocess.Popen | None = None, **kw) -> None:
    """Wait until something accepts connections on host:port; fail at once if `proc` exits first."""

    def up() -> bool:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited with {proc.returncode} before {host}:{port} answered")
        return port_answers(host, port)

    wait_until(up, f"{host}:{port} to accept connections", **kw)


def wait_for_http(url: str, proc: subprocess.Popen | None = None, log: Path | None = None, **kw) -> None:
    """Wait until GET `url` answers 200 (an engine's /health); fail at once, with `log`'s tail, if
    `proc` exits first."""
    import urllib.request

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""

    def ok() -> bool:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited with {proc.returncode} before {url} answered\n{tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    wait_until(ok, f"{url} to answer 200", details=tail, **kw)
