"""Arrivals replayed from a recorded trace (Mooncake-style JSONL, or one timestamp per line).

Only the pattern is taken from the trace: its inter-arrival gaps, scaled so their mean rate is
the scenario's `rate` (bursts and lulls keep their shape at any load level), cycling when the
trace ends. Timestamps are sorted first (logs are not always in order); gaps of zero (requests
logged in the same tick) are kept: they are the bursts. No randomness: the seed plays no part.

Records sharing a `session_id` are one session's turns: the session arrives at its earliest
timestamp, and its later turns are sent when the previous one has ended (harness.workload.block_trace),
so a session is one arrival here.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import UserError
from harness.scenario.models import Load, Trace
from harness.workload.arrivals import ARRIVALS, Pattern
from harness.workload.files import file_id, read_input, resolve

_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
MAX_PROBLEMS = 5


def load_gaps(trace: Trace, base_dir: Path | None) -> np.ndarray:
    """Inter-arrival gaps in seconds (at the trace's own rate); one-line errors naming file:line."""
    p = resolve(trace.path, base_dir)
    text = read_input(p, "load.trace.path").decode("utf-8", errors="replace")
    stamps: list[float] = []
    problems: list[str] = []
    starts: dict[Any, float] = {}  # session id -> its first (earliest) timestamp
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            value = json.loads(line)
            sid = None
            if isinstance(value, dict):
                sid = value.get("session_id")
                sid = None if isinstance(sid, (dict, list)) else sid
                value = value.get(trace.field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError
            if not math.isfinite(value):  # json.loads takes NaN and Infinity; one would skew every gap
                problems.append(f"{p}:{n}: {value} is not a finite timestamp in field {trace.field!r}")
                if len(problems) >= MAX_PROBLEMS:
                    problems.append(f"{p}: stopped after {MAX_PROBLEMS} bad lines")
                    break
                continue
        except (ValueError, RecursionError):  # RecursionError: a line nested too deeply to read
            problems.append(f"{p}:{n}: no number in field {trace.field!r} (a JSON object with it, or a bare number)")
            if len(problems) >= MAX_PROBLEMS:
                problems.append(f"{p}: stopped after {MAX_PROBLEMS} bad lines")
                break
            continue
        if sid is None:
            stamps.append(float(value) * _UNIT[trace.unit])
        else:  # a session arrives once, at its first turn; later turns follow its previous turn's end
            starts[sid] = min(starts.get(sid, math.inf), float(value) * _UNIT[trace.unit])
    stamps.extend(starts.values())
    if problems:
        raise UserError(*problems)
    if len(stamps) < 2:
        raise UserError(f"load.trace.path: {p} has {len(stamps)} timestamp(s); a trace needs at least 2")
    gaps = np.diff(np.sort(np.asarray(stamps)))
    if gaps.sum() <= 0:
        raise UserError(f"load.trace.path: every timestamp in {p} is the same; nothing to take a rate from")
    return gaps


def trace_rate(gaps: np.ndarray) -> float:
    """The trace's own mean rate (requests per second)."""
    return float(len(gaps) / gaps.sum())


class TracePattern(Pattern):
    """`arrival: trace` with `load.trace`: the file is read (and checked) once per schedule."""

    def steady_offsets(self, load: Load, rng: np.random.Generator, base_dir: Path | None) -> Iterator[float]:
        assert load.trace is not None and load.rate is not None  # validated
        raw = load_gaps(load.trace, base_dir)
        gaps = (raw * (trace_rate(raw) / load.rate)).tolist()  # the trace's shape at the scenario's rate
        u = 0.0
        yield u  # request 0 at 0, then the trace's gaps, cycling
        for gap in itertools.cycle(gaps):
            u += gap
            yield u

    def check(self, load: Load, base_dir: Path | None) -> None:
        if load.trace is not None:
            load_gaps(load.trace, base_dir)

    def fingerprint(self, load: dict[str, Any], base_dir: Path | None) -> dict[str, Any]:
        if not load.get("trace"):
            return load
        # a trace's content defines the arrivals, not where the file lives
        return {**load, "trace": {**load["trace"], "path": file_id(load["trace"]["path"], base_dir, "load.trace.path")}}

    def summary(self, load: Load) -> dict[str, Any]:
        return {"trace": load.trace.model_dump()} if load.trace is not None else {}


ARRIVALS.add("trace", TracePattern())
