"""The engine's log over the measured window, counted by kind of event.

The guides tell the user to read the log during serving ("If you see repeated compilation
warnings during serving ..."). When the harness started the engine (sweeps, tune, the embedded
simulator) it knows the log file; for a server it did not start, `--engine-log FILE` names it.
`LogWindow` notes the file's size when the window opens and when it closes (two `stat` calls, off
the hot path), so only the lines written during the window count, even in a sweep's log that
holds every earlier cell too. Each kind (recompilation, preemption, OOM, CUDA error, abort) gets a
count and its first line; the pattern table is the engine kind's (its `log_patterns`, harness/engines).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.diagnose.base import ANALYSES, RunInputs
from harness.engines import log_patterns
from harness.engines.parts.facts import strip_ansi
from harness.engines.parts.logs import EVENTS

#: a log larger than this inside one window is read up to here (the counts then say so)
MAX_BYTES = 256 << 20


class LogWindow:
    """Byte offsets of an engine log at the window's start and end."""

    def __init__(self, path: Path | str | None) -> None:
        self.path = Path(path) if path else None
        self.start: int | None = None
        self.end: int | None = None

    def _size(self) -> int | None:
        if self.path is None:
            return None
        try:
            return os.path.getsize(self.path)
        except OSError:
            return None

    def mark_start(self) -> None:
        self.start = self._size()

    def mark_end(self) -> None:
        self.end = self._size()

    @property
    def span(self) -> tuple[int, int] | None:
        if self.start is None:
            return None
        end = self.end if self.end is not None else self._size()
        return (self.start, end) if end is not None and end >= self.start else None


class EngineLog:
    name = "engine_log"

    def analyze(self, inp: RunInputs) -> dict[str, Any] | None:
        path = inp.options.engine_log
        if path is None:
            return None
        table = log_patterns(inp.options.engine_kind)
        block: dict[str, Any] = {"path": str(path), "patterns": table.name}
        try:
            size = os.path.getsize(path)
        except OSError as exc:
            block["missing_reason"] = f"cannot read the engine log: {exc.strerror or exc}"
            return block
        span = inp.options.log_window
        if span is None:
            start, end, scope = 0, size, "whole log (the window was not marked)"
        else:
            start, end, scope = span[0], min(span[1], size), "measured window"
        block["scope"] = scope
        block["bytes"] = [start, end]
        truncated = end - start > MAX_BYTES
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(min(end - start, MAX_BYTES))
        counts: dict[str, int] = {}
        first: dict[str, str] = {}
        lines = 0
        for raw in data.decode("utf-8", "replace").splitlines():
            line = strip_ansi(raw).strip()
            if not line:
                continue
            lines += 1
            kind = table.classify(line)
            if kind is None:
                continue
            counts[kind] = counts.get(kind, 0) + 1
            first.setdefault(kind, line[:300])
        block["lines"] = lines
        if truncated:
            block["truncated_at_bytes"] = MAX_BYTES
        block["events"] = {
            k: {"count": counts[k], "first": first[k], "means": EVENTS[k]} for k in EVENTS if k in counts
        }
        block["warnings"] = [f"{counts[k]} {EVENTS[k]} (first: {first[k][:160]})" for k in EVENTS if k in counts]
        return block


ANALYSES.add("engine_log", EngineLog())
