"""engine_metrics.jsonl: one line per scrape (or mark) as it happens, so a run that dies keeps
its engine time series; the line's canonical values are also what live displays read.

The session (harness.telemetry.session) decides when to scrape; this module only says what a
line holds and writes it without ever failing the run (a full disk loses lines, not the run).
"""

from __future__ import annotations

import json
import logging
import math
import pathlib
from typing import Any

from harness.engines.parts.metrics import COUNTERS, Profile
from harness.telemetry.exposition import Snapshot

log = logging.getLogger("harness.telemetry")

METRICS_FILE = "engine_metrics.jsonl"


def canonical_values(profile: Profile, snap: Snapshot) -> dict[str, Any]:
    """One scrape's canonical values: gauges, cumulative counters, capacity."""
    out: dict[str, Any] = dict(profile.gauge_values(snap))
    for c in COUNTERS:
        out[f"{c}_total"] = profile.counter_total(snap, c)
    out.update(profile.capacity(snap))
    return out


class ScrapeLog:
    """Appends lines to OUT_DIR/engine_metrics.jsonl; a file that cannot be opened is warned about once."""

    def __init__(self, out_dir: pathlib.Path) -> None:
        self._file: Any = None
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            # held open across scrapes (one line each, flushed) until close(): no context manager
            self._file = open(out_dir / METRICS_FILE, "a", encoding="utf-8")
        except OSError as exc:
            log.warning("engine telemetry: cannot write %s (%s); time series not saved", METRICS_FILE, exc)

    def write(self, line: dict[str, Any]) -> None:
        if self._file is None:
            return
        try:
            self._file.write(json.dumps(line, allow_nan=False, default=_json_default) + "\n")
            self._file.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _json_default(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)
