"""The post-run analysis seam: what an analysis reads and the registry it joins.

Each analysis is one small module that reads the finished run directory (requests.jsonl,
engine_metrics.jsonl, progress.jsonl, the engine's log) and returns one block for
`summary.json["diagnosis"]`. They run after the measured window, so the hot path (load
processes, stamped reader) never pays for them; a failing analysis loses its block only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

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


@dataclass
class RunInputs:
    root: Path
    summary: RunSummary
    options: DiagnoseOptions
    requests: list[dict[str, Any]] = field(default_factory=list)  # measured requests only
    engine_metrics: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    #: filled as analyses run: earlier blocks, for later ones (findings reads them all)
    blocks: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path, summary: RunSummary, options: DiagnoseOptions) -> RunInputs:
        reqs = [r for r in _jsonl(root / "requests.jsonl") if not r.get("warmup")]
        return cls(
            root=root,
            summary=summary,
            options=options,
            requests=reqs,
            engine_metrics=_jsonl(root / "engine_metrics.jsonl"),
            progress=_jsonl(root / "progress.jsonl"),
        )

    @property
    def window(self) -> tuple[float, float] | None:
        w = self.summary.window
        if w.start is not None and w.duration_s > 0:
            return w.start, w.start + w.duration_s
        return None

    def clock_offset_s(self) -> float | None:
        """Seconds to add to a request's monotonic stamp (ns / 1e9) to get unix time.

        requests.jsonl stamps are perf_counter_ns; the window opens (unix time) right before
        the first measured send, so the earliest measured send anchors the two clocks (to
        within the load loop's scheduling delay: ms, well below a slice or a scrape interval).
        """
        w = self.window
        starts = [s for r in self.requests if (s := _start_ns(r)) is not None]
        if w is None or not starts:
            return None
        return w[0] - min(starts) / 1e9


class Analysis(Protocol):
    name: str

    def analyze(self, inp: RunInputs) -> dict[str, Any] | None:
        """The block for summary["diagnosis"][name]; None when the run holds nothing to say."""
        ...


ANALYSES: Registry[Analysis] = Registry("post-run analysis")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if not path.is_file():
        return rows  # a device in its place (/dev/zero, /dev/full) would be read forever
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    rows.append(obj)
    except OSError:
        pass
    return rows


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
