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
import queue
import threading

from harness.sim.request import SimRequest
from harness.sim.sse import KINDS

_KIND_JSON = tuple(json.dumps(k) for k in KINDS)


class TraceWriter:
    """Buffers trace lines; a background thread does the file I/O so a slow disk (writeback
    throttling can block `write()` for 100+ ms) never stalls the event loop that writes tokens."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "w", encoding="utf-8")
        self._lines: list[str] = []
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._writer, name="sim-trace-writer", daemon=True)
        self._thread.start()

    def _writer(self) -> None:
        while True:
            chunk = self._queue.get()
            if chunk is None:
                return
            self._file.write(chunk)
            self._file.flush()

    def record(self, req: SimRequest) -> None:
        # Hand-rolled JSON: ~3x faster than json.dumps on a list of lists, and it runs on the
        # event loop between token writes.
        writes = ""
        if req.trace is not None:
            it = iter(req.trace)
            writes = ",".join([f"[{t},{n},{_KIND_JSON[k]}]" for t, n, k in zip(it, it, it)])
        self._lines.append(
            f'{{"request_id":{json.dumps(req.rid)},"received_ns":{req.arrival_ns},'
            f'"received_wall_ns":{req.arrival_wall_ns},"finish_reason":{json.dumps(req.finish_reason)},'
            f'"prompt_tokens":{req.prompt_len},"completion_tokens":{len(req.out_ids)},"writes":[{writes}]}}'
        )

    def flush(self) -> None:
        """Hand buffered lines to the writer thread (non-blocking)."""
        if self._lines:
            self._queue.put("\n".join(self._lines) + "\n")
            self._lines.clear()

    def close(self) -> None:
        """Flush everything to disk and close (blocks until written)."""
        self.flush()
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(10)
        if not self._file.closed:
            self._file.flush()
            self._file.close()
