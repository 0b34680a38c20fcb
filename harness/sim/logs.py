"""vLLM-format log lines: `(Component pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message`.

INFO lines go to stdout, errors to stderr, each flushed at once so a parent process that
watches the output sees them as they happen.
"""

from __future__ import annotations

import os
import sys
import time

API = "APIServer"
CORE = "EngineCore_DP0"


def log(component: str, where: str, message: str, level: str = "INFO") -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    stream = sys.stderr if level in ("ERROR", "CRITICAL") else sys.stdout
    stream.write(f"({component} pid={os.getpid()}) {level} {stamp} [{where}] {message}\n")
    stream.flush()


def error_lines(lines: list[str]) -> None:
    for line in lines:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
