"""The post-run analysis seam: what an analysis reads and the registry it joins.

Each analysis is one small module that reads the finished run directory (requests.jsonl,
engine_metrics.jsonl, progress.jsonl, the engine's log) and returns one block for
`summary.json["diagnosis"]`. They run after the measured window, so the hot path (load
processes, stamped reader) never pays for them; a failing analysis loses its block only.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import orjson

from harness.diagnose.tally import ms_key
from harness.metrics import percentile
from harness.registry import Registry
from harness.results.models.summary import RunSummary


@dataclass
class DiagnoseOptions:
    #: width of one timeslice (`--slice-s`)
    slice_s: float = 10.0
    #: an ITL gap is a spike when above this many times the median gap
    spike_factor: float = 3.0
    #: a prompt is a "long prefill" at or above this many tokens (None: max(1024, 4 x median prompt))
    long_prompt_tokens: int | None = None
    #: the engine's log and the byte range [start, end) written during the measured window
    engine_log: Path | None = None
    log_window: tuple[int, int] | None = None
    #: the engine kind, its profile name or an alias (harness.engines.find_kind)
    engine_kind: str | None = None


#: a batch of requests closes at this many chunks or this many requests (~20 MB as dicts, ~10 MB as columns)
BATCH_CHUNKS = 1 << 18
BATCH_REQUESTS = 1 << 12


@dataclass
class RunInputs:
    """What an analysis reads. The per-request records are never held all at once: a 1-hour run
    at 512 streams has 360,000 of them (5 GB as Python dicts); `measured()` and `batches()` read
    requests.jsonl line by line, once per pass, and the analyses keep only bounded aggregates.
    `requests`, when given (tests), stands in for the file."""

    root: Path
    summary: RunSummary
    options: DiagnoseOptions
    requests: list[dict[str, Any]] | None = None  # measured requests; None: read requests.jsonl
    engine_metrics: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    #: filled as analyses run: earlier blocks, for later ones (findings reads them all)
    blocks: dict[str, Any] = field(default_factory=dict)
    _first_start_ns: list[int | None] = field(default_factory=list, repr=False)  # [] until computed

    @classmethod
    def load(cls, root: Path, summary: RunSummary, options: DiagnoseOptions) -> RunInputs:
        return cls(
            root=root,
            summary=summary,
            options=options,
            engine_metrics=_jsonl(root / "engine_metrics.jsonl"),
            progress=_jsonl(root / "progress.jsonl"),
        )

    def measured(self) -> Iterator[dict[str, Any]]:
        """One pass over the measured (non-warmup) requests, one record at a time."""
        rows = self.requests if self.requests is not None else iter_jsonl(self.root / "requests.jsonl")
        for r in rows:
            if not r.get("warmup"):
                yield r

    def batches(self) -> Iterator[Batch]:
        """One pass over the measured requests as columns, a bounded batch at a time."""
        max_chunks, max_requests = BATCH_CHUNKS, BATCH_REQUESTS
        rows: list[dict[str, Any]] = []
        chunks = 0
        first: int | None = None  # the earliest start, remembered after a whole pass (clock_offset_s)
        collect = gc.isenabled()
        gc.disable()  # the records are acyclic and freed by reference counts; the cyclic collector
        try:  # rescanning millions of short-lived dicts cost ~25% of a pass
            for r in self.measured():
                rows.append(r)
                chunks += len(r.get("chunk_offsets_us") or ())
                if chunks >= max_chunks or len(rows) >= max_requests:
                    batch = Batch.of(rows)
                    first = _earliest(first, batch.first_start_ns)
                    rows, chunks = [], 0
                    yield batch
            if rows:
                batch = Batch.of(rows)
                first = _earliest(first, batch.first_start_ns)
                rows = []
                yield batch
            if not self._first_start_ns:
                self._first_start_ns.append(first)
        finally:
            if collect:
                gc.enable()

    @property
    def window(self) -> tuple[float, float] | None:
        w = self.summary.window
        if w.start is not None and w.duration_s > 0:
            return w.start, w.start + w.duration_s
        return None

    def first_start_ns(self) -> int | None:
        """The earliest measured request's start (remembered from any whole pass, else one pass)."""
        if not self._first_start_ns:
            first: int | None = None
            for r in self.measured():
                s = _start_ns(r)
                if s is not None and (first is None or s < first):
                    first = s
            self._first_start_ns.append(first)
        return self._first_start_ns[0]

    def clock_offset_s(self) -> float | None:
        """Seconds to add to a request's monotonic stamp (ns / 1e9) to get unix time.

        requests.jsonl stamps are perf_counter_ns; the window opens (unix time) right before
        the first measured send, so the earliest measured send anchors the two clocks (to
        within the load loop's scheduling delay: ms, well below a slice or a scrape interval).
        """
        w = self.window
        if w is None:
            return None
        first = self.first_start_ns()
        if first is None:
            return None
        return w[0] - first / 1e9


@dataclass
class Batch:
    """Measured requests as columns. Per request: `start_s` (monotonic s, NaN without a start),
    `sent_s` (NaN without), `ok` (no error), `ttft_ms` / `e2e_ms` (NaN without), `prompt` (tokens:
    usage, else intended, else 0), `chunks` (content chunks, 0 without a start). Per chunk,
    request by request: `offsets_us` (from the start) and `tokens` (chunk_tokens, else 1 each)."""

    start_s: np.ndarray
    sent_s: np.ndarray
    ok: np.ndarray
    ttft_ms: np.ndarray
    e2e_ms: np.ndarray
    prompt: np.ndarray
    chunks: np.ndarray
    offsets_us: np.ndarray
    tokens: np.ndarray
    first_start_ns: int | None = None  # the earliest start (exact ns)

    @staticmethod
    def of(rows: list[dict[str, Any]]) -> Batch:
        starts = [_start_ns(r) for r in rows]
        offs = [(r.get("chunk_offsets_us") or []) if s is not None else [] for r, s in zip(rows, starts, strict=True)]
        chunks = np.fromiter(map(len, offs), dtype=np.int64, count=len(rows))
        toks = [
            t if len(t) == len(o) else [1] * len(o)
            for t, o in zip((r.get("chunk_tokens") or [] for r in rows), offs, strict=True)
        ]
        nan = math.nan

        def num(key: str) -> np.ndarray:
            return np.fromiter(
                (v if isinstance(v := r.get(key), (int, float)) else nan for r in rows), dtype=float, count=len(rows)
            )

        return Batch(
            start_s=np.fromiter((nan if s is None else s / 1e9 for s in starts), dtype=float, count=len(rows)),
            sent_s=num("sent_ns") / 1e9,
            ok=np.fromiter((not r.get("error") for r in rows), dtype=bool, count=len(rows)),
            ttft_ms=num("ttft_ms"),
            e2e_ms=np.fromiter((float(r.get("e2e_ms") or 0.0) for r in rows), dtype=float, count=len(rows)),
            prompt=np.fromiter(map(_prompt_len, rows), dtype=float, count=len(rows)),
            chunks=chunks,
            offsets_us=np.fromiter(chain.from_iterable(offs), dtype=float, count=int(chunks.sum())),
            tokens=np.fromiter(chain.from_iterable(toks), dtype=float, count=int(chunks.sum())),
            first_start_ns=min((s for s in starts if s is not None), default=None),
        )

    def chunk_times_s(self) -> np.ndarray:
        """Arrival of every chunk, monotonic seconds: exactly `chunk_times_s` of each request."""
        return np.repeat(self.start_s, self.chunks) + self.offsets_us / 1e6

    def chunk_request(self) -> np.ndarray:
        """The request (row) of every chunk."""
        return np.repeat(np.arange(self.chunks.size), self.chunks)

    def first_chunk(self) -> np.ndarray:
        """Per chunk: whether it is its request's first (a gap ends at every other one)."""
        first = np.zeros(self.offsets_us.size, dtype=bool)
        starts = np.cumsum(self.chunks) - self.chunks
        first[starts[self.chunks > 0]] = True
        return first

    def gap_keys_us(self, gaps_ms: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """The microsecond key (harness.diagnose.tally) of each gap (`gap`: the chunks that end one;
        `gaps_ms` their gaps as computed from float times). Stamps are whole microseconds, so the
        key is the difference of the offsets exactly; float times near 1.7e9 s differ from it
        by under 0.5 us, which the figures' 3-decimal rounding removes."""
        offs = self.offsets_us
        diff = np.diff(offs, prepend=0.0)[gap]
        if np.array_equal(offs, np.floor(offs)):
            return diff.astype(np.int64)
        return np.asarray([ms_key(g) for g in gaps_ms.tolist()], dtype=np.int64)


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _prompt_len(r: dict[str, Any]) -> float:
    for key in ("input_tokens", "intended_input_tokens"):
        v = r.get(key)
        if isinstance(v, (int, float)):
            return float(v)
    return 0.0


class Analysis(Protocol):
    name: str

    def analyze(self, inp: RunInputs) -> dict[str, Any] | None:
        """The block for summary["diagnosis"][name]; None when the run holds nothing to say."""
        ...


ANALYSES: Registry[Analysis] = Registry("post-run analysis")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return list(iter_jsonl(path))


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSON-lines file, one at a time; unreadable lines are skipped (a run that
    stopped mid-write leaves half a last line)."""
    if not path.is_file():
        return  # a device in its place (/dev/zero, /dev/full) would be read forever
    try:
        with open(path, "rb") as fh:
            for line in fh:
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:  # NaN, bad UTF-8: the standard parser, as before
                    try:
                        obj = json.loads(line.decode("utf-8", errors="replace"))
                    except ValueError:
                        continue
                if isinstance(obj, dict):
                    yield obj
    except OSError:
        return


def _start_ns(r: dict[str, Any]) -> int | None:
    v = r.get("intended_ns") if r.get("intended_ns") is not None else r.get("sent_ns")
    return int(v) if isinstance(v, (int, float)) else None


def start_ns(r: dict[str, Any]) -> int | None:
    """The request's start on the monotonic clock: intended send (open loop), else actual send."""
    return _start_ns(r)


def chunk_times_s(r: dict[str, Any]) -> np.ndarray:
    """Arrival of each content chunk, monotonic seconds."""
    s = _start_ns(r)
    offs = r.get("chunk_offsets_us") or []
    if s is None or not offs:
        return np.empty(0)
    return s / 1e9 + np.asarray(offs, dtype=float) / 1e6


def pct(values: np.ndarray | list[float], q: float) -> float | None:
    return percentile.of_values(values, q)


def rnd(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)
