"""A partial summary.json computed from requests.jsonl, for runs that never wrote their summary
(a crash, a kill): the report still shows rates and latency percentiles, marked partial and
with the reason in its validity warnings.

Latencies come from the request records' own fields (the metric table's `record_field`s), so
the same per-request values the run derived once are summarised here, not recomputed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.metrics import percentile
from harness.metrics.table import METRICS
from harness.results.schema import RunSummary


def _pcts(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"count": 0}
    arr = np.asarray(values, dtype=float)
    q = percentile.of_values_many(arr, (50.0, 90.0, 99.0, 99.9))
    return {
        "count": int(arr.size),
        "mean": float(arr.mean()),
        "p50": q[0],  # floats (None only where every value is NaN)
        "p90": q[1],
        "p99": q[2],
        "p999": q[3],
        "max": float(arr.max()),
        "min": float(arr.min()),
    }


def summary_from_requests(requests: list[dict[str, Any]], progress: list[dict[str, Any]]) -> RunSummary:
    """A partial summary from per-request records (for runs that never wrote summary.json)."""
    rows = [r for r in requests if not r.get("warmup")]
    ok = [r for r in rows if not r.get("error")]
    failed = [r for r in rows if r.get("error")]
    errors: dict[str, int] = {}
    for r in failed:
        errors[str(r.get("error"))] = errors.get(str(r.get("error")), 0) + 1

    def start_ns(r: dict[str, Any]) -> float | None:
        v = r.get("intended_ns") if r.get("intended_ns") is not None else r.get("sent_ns")
        return float(v) if isinstance(v, (int, float)) else None

    starts = [s for s in (start_ns(r) for r in rows) if s is not None]
    ends = [
        s + float(r["e2e_ms"]) * 1e6
        for r in ok
        if (s := start_ns(r)) is not None and isinstance(r.get("e2e_ms"), (int, float))
    ]
    duration = (max(ends) - min(starts)) / 1e9 if starts and ends and max(ends) > min(starts) else 0.0

    def block(sel: list[dict[str, Any]]) -> dict[str, Any]:
        good = [r for r in sel if not r.get("error")]
        inp = sum(int(r.get("input_tokens") or 0) for r in good)
        out = sum(int(r.get("output_tokens") or 0) for r in good)
        return {
            "requests": {
                "completed": len(good),
                "failed": len(sel) - len(good),
                "rps": len(good) / duration if duration else 0.0,
            },
            "tokens": {
                "input_total": inp,
                "output_total": out,
                "input_per_s": inp / duration if duration else 0.0,
                "output_per_s": out / duration if duration else 0.0,
            },
            "latency_ms": {  # the table's per-request fields (harness.metrics.table)
                m.name: _pcts(
                    [float(r[m.record_field]) for r in good if isinstance(r.get(m.record_field), (int, float))]
                )
                for m in METRICS
                if m.record_field and not m.optional
            },
        }

    overall = block(rows)
    classes = sorted({str(r.get("class")) for r in rows if r.get("class") is not None})
    data: dict[str, Any] = {
        "requests": {**overall["requests"], "errors_by_kind": errors},
        "tokens": overall["tokens"],
        "latency_ms": overall["latency_ms"],
        "per_class": {c: block([r for r in rows if r.get("class") == c]) for c in classes},
        "window": {"duration_s": duration},
        "status": "partial",
        "validity": {
            "ok": False,
            "warnings": ["summary computed from requests.jsonl: ITL, engine telemetry and goodput are not available"],
        },
    }
    if progress:
        data["window"]["start"] = progress[0].get("t")
    return RunSummary.model_validate(data)
