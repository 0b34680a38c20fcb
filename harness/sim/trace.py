"""`--trace FILE`: ground-truth write times, one JSON line per finished request.

    {"request_id": ..., "received_ns": <perf_counter_ns at arrival>, "received_wall_ns": <time_ns>,
     "finish_reason": ..., "prompt_tokens": ..., "completion_tokens": ...,
     "writes": [[perf_counter_ns right after the transport write, n_tokens, kind], ...]}

kind is role | content | usage | done. perf_counter_ns is CLOCK_MONOTONIC, so it compares with
a client's perf_counter_ns on the same host. Lines are buffered in memory and written by a
periodic flush and at exit (SIGTERM/SIGINT included).
"""

from __future__ import annotations

import json

from harness.sim.request import SimRequest
from harness.sim.sse import trace_rows


class TraceWriter:
    def __init__(self, path: str) -> None:
        self._file = open(path, "w", encoding="utf-8")
        self._lines: list[str] = []

    def record(self, req: SimRequest) -> None:
        self._lines.append(json.dumps({
            "request_id": req.rid,
            "received_ns": req.arrival_ns,
            "received_wall_ns": req.arrival_wall_ns,
            "finish_reason": req.finish_reason,
            "prompt_tokens": req.prompt_len,
            "completion_tokens": len(req.out_ids),
            "writes": trace_rows(req.trace) if req.trace is not None else [],
        }, separators=(",", ":")))

    def flush(self) -> None:
        if self._lines and not self._file.closed:
            self._file.write("\n".join(self._lines) + "\n")
            self._lines.clear()
            self._file.flush()

    def close(self) -> None:
        self.flush()
        if not self._file.closed:
            self._file.close()
