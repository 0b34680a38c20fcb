"""One run's results in the files other tools read: `--json` (the summary), `--csv` (one row per
class and latency metric), and percentiles a user chooses (`--percentiles 50,90,99,99.9`).

Chosen percentiles are read from the lossless HDR histograms (histograms.json), never
interpolated from the summary's fixed ones, so p95 or p99.99 is as exact as p99.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.metrics.hdr import Histogram
from harness.metrics.recorder import RESERVED, class_keys
from harness.results.read import load_run
from harness.results.schema import LATENCY_METRICS

DEFAULT_PERCENTILES = (50.0, 90.0, 99.0, 99.9)
NS_PER_MS = 1e6


def parse_percentiles(text: str) -> tuple[float, ...]:
    """`50,90,99,99.9` -> (50.0, 90.0, 99.0, 99.9); one-line error for anything else."""
    out: list[float] = []
    for part in str(text).split(","):
        part = part.strip().lower().removeprefix("p")
        try:
            value = float(part)
        except ValueError:
            raise UserError(f"--percentiles {text!r}: {part!r} is not a number; write e.g. 50,90,99,99.9") from None
        if not math.isfinite(value) or not 0 < value <= 100:
            raise UserError(f"--percentiles {text!r}: {part} is outside (0, 100]")
        if value not in out:
            out.append(value)
    return tuple(out)


def label(p: float) -> str:
    """50 -> p50, 99.9 -> p99.9 (the summary's fixed key for 99.9 is p999; this is the display label)."""
    return f"p{p:g}"


def chosen(
    histograms: dict[str, Any], percentiles: tuple[float, ...], group: str = "_all"
) -> dict[str, dict[str, Any]]:
    """{metric: {"count", "mean", "p50", ..., "max"}} in ms for one class (or `_all`), from HDR."""
    blobs = (histograms.get(group) or {}).get("hist") or {}
    out: dict[str, dict[str, Any]] = {}
    for metric in LATENCY_METRICS:
        if metric not in blobs:
            continue
        h = Histogram.from_dict(blobs[metric])
        row: dict[str, Any] = {"count": h.count, "mean": None, "max": None}
        row.update({label(p): None for p in percentiles})
        if h.count:
            row["mean"] = h.sum / h.count / NS_PER_MS
            for p, v in zip(percentiles, h.percentiles(list(percentiles)), strict=True):
                row[label(p)] = v / NS_PER_MS  # nearest rank, within [min, max] (harness.metrics.percentile)
            row["max"] = (h.max or 0) / NS_PER_MS
        out[metric] = row
    return out


def read_histograms(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "histograms.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def write_json(path: Path, run_dir: Path, percentiles: tuple[float, ...]) -> Path:
    """summary.json plus `percentiles_ms`: {class: {metric: stats}} at the chosen percentiles."""
    summary = load_run(run_dir).model_dump(mode="json")  # the file as written (typed round trip)
    hist = read_histograms(run_dir)
    summary["percentiles_ms"] = {group: chosen(hist, percentiles, group) for group in hist if group not in RESERVED[1:]}
    summary["percentiles"] = list(percentiles)
    _parent(path)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path


def write_csv(path: Path, run_dir: Path, percentiles: tuple[float, ...]) -> Path:
    """One row per (class, latency metric), `_all` first: count, mean, chosen percentiles, max (ms),
    then the class's requests/s and output tokens/s so one file answers "how fast, how good"."""
    summary = load_run(run_dir)
    hist = read_histograms(run_dir)
    pcols = [label(p) for p in percentiles]
    cols = ["class", "metric", "unit", "count", "mean", *pcols, "max", "requests_per_s", "output_tokens_per_s"]
    groups = ["_all", *sorted(class_keys(hist))]
    _parent(path)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for group in groups:
            block = summary if group == "_all" else summary.per_class.get(group)
            rps = block.requests.rps if block is not None else None
            tok = block.tokens.output_per_s if block is not None else None
            for metric, row in chosen(hist, percentiles, group).items():
                if not row["count"] and metric == "send_lag":
                    continue  # closed loop: no intended send times
                w.writerow(
                    [
                        group,
                        metric,
                        "ms",
                        row["count"],
                        _num(row["mean"]),
                        *(_num(row[c]) for c in pcols),
                        _num(row["max"]),
                        _num(rps),
                        _num(tok),
                    ]
                )
    return path


def _num(v: Any) -> str:
    return "" if v is None else f"{v:.6g}"


def _parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{path}: cannot create its directory ({exc.strerror})") from None
