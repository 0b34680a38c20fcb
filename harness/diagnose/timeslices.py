"""Per-interval figures over the measured window, and a steady-state check.

A window's percentiles describe the whole window; they hide a run that never settled (the
cache still warming, a queue still building, memory still growing). Cutting the window into
slices of `slice_s` (default 10 s, `--slice-s`) shows the trend, and comparing the first and the
last full slice against the slice-to-slice noise says whether the window was steady.

Per slice: requests finished, output tokens/s (by chunk arrival), TTFT p50/p99 (requests that
started in the slice), ITL p50/p99 (gaps that ended in it), mean in-flight requests (time-weighted),
engine KV usage and queue depth (scrapes in the slice), GPU memory when sampled.
The slices go to `timeslices.json`; summary.json keeps the width, count and the drift verdict.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import numpy as np

from harness.diagnose.base import ANALYSES, Batch, RunInputs, rnd
from harness.diagnose.tally import TwoPassPercentiles, key_ms, ms_key
from harness.results.layout import write_text_atomic

FILE = "timeslices.json"
PCTS = (50.0, 99.0)

#: metric -> (label, what a rise means, relative floor, absolute floor): a change smaller than
#: either floor is never drift, whatever the noise estimate says (a flat series has zero noise)
CHECKED: dict[str, tuple[str, str, float, float]] = {
    "output_tps": ("output tokens/s", "throughput still changing", 0.10, 1.0),
    "ttft_p50_ms": ("TTFT p50", "a queue still building or a cache still warming", 0.20, 2.0),
    "itl_p50_ms": ("ITL p50", "batch still growing", 0.20, 0.5),
    "kv_usage_mean": ("KV usage", "the cache still filling", 0.0, 0.05),
    "waiting_mean": ("waiting requests", "a queue still building", 0.0, 2.0),
    "in_flight_mean": ("in-flight requests", "load still ramping", 0.0, 2.0),
    "gpu_used_gib": ("GPU memory", "memory still growing", 0.0, 0.25),
}


class Timeslices:
    name = "timeslices"

    def analyze(self, inp: RunInputs) -> dict[str, Any] | None:
        w = inp.window
        off = inp.clock_offset_s()
        if w is None or off is None:
            return None
        width = max(0.1, float(inp.options.slice_s))
        t0, t1 = w
        n = max(1, math.ceil((t1 - t0) / width - 1e-9))
        edges = np.asarray([t0 + i * width for i in range(n)] + [t1])
        slices = compute_slices(inp, edges, off)
        # the drain (after the last measured send) is not steady by design: closed-loop concurrency
        # falls off, an open-loop backlog empties. The check reads the full slices before it.
        drain = inp.summary.window.drain_s
        sends_end = t1 - drain
        for s, a in zip(slices, edges[:-1], strict=True):
            s["drain"] = bool(a + width > sends_end + 1e-6)
        full = [s for s in slices if s["duration_s"] >= 0.5 * width and not s["drain"]]
        drift = steady_state(full)
        with contextlib.suppress(OSError):  # the analysis stands without its file
            write_text_atomic(inp.root / FILE, json.dumps({"slice_s": width, "slices": slices}, indent=1) + "\n")
        return {"slice_s": width, "count": len(slices), "file": FILE, "steady_state": drift}


def compute_slices(inp: RunInputs, edges: np.ndarray, off: float) -> list[dict[str, Any]]:
    """Two passes over the requests in bounded batches into per-slice aggregates (counts, sums, and
    the exact percentiles: harness.diagnose.tally), then one row per slice. Memory does not grow
    with the number of requests (a 1-hour run at 512 streams has 360,000 and 36 million gaps)."""
    n = len(edges) - 1
    t0 = float(edges[0])
    closed = edges.copy()
    closed[-1] += 1e-3  # the last completion closes the window: it belongs to the last slice

    def index(t: np.ndarray) -> np.ndarray:
        return np.searchsorted(closed, t, side="right") - 1 if t.size else np.empty(0, dtype=int)

    def inside(idx: np.ndarray) -> np.ndarray:
        return (idx >= 0) & (idx < n)

    def keyed(bt: Batch, ct: np.ndarray, st: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(slice, microsecond key) of each TTFT (by start) and each ITL gap (by its end)."""
        ttft_ms = bt.ttft_ms[~np.isnan(bt.start_s)]
        fin = np.isfinite(ttft_ms)
        ttft_keys = np.asarray([ms_key(v) for v in ttft_ms[fin].tolist()], dtype=np.int64)
        gap = ~bt.first_chunk()
        gaps_ms = (ct[1:] - ct[:-1])[gap[1:]] * 1e3
        return index(st[fin]), ttft_keys, index(ct[gap]), bt.gap_keys_us(gaps_ms, gap)

    done = np.zeros(n, dtype=np.int64)
    tokens = np.zeros(n)
    busy = np.zeros(n)
    ttft = TwoPassPercentiles(n, PCTS)
    itl = TwoPassPercentiles(n, PCTS)
    for bt in inp.batches():
        has = ~np.isnan(bt.start_s)
        st_a = bt.start_s[has] + off
        ct = bt.chunk_times_s() + off
        last = np.cumsum(bt.chunks) - 1
        en_all = bt.start_s + off + bt.e2e_ms / 1e3
        en_all[bt.chunks > 0] = ct[last[bt.chunks > 0]]
        en_a = en_all[has]
        fin_idx = index(en_a[bt.ok[has]])
        done += np.bincount(fin_idx[inside(fin_idx)], minlength=n)
        tok_idx = index(ct)
        keep = inside(tok_idx)
        tokens += np.bincount(tok_idx[keep], weights=bt.tokens[keep], minlength=n)
        t_idx, t_key, g_idx, g_key = keyed(bt, ct, st_a)
        ttft.add(t_idx, t_key)
        itl.add(g_idx, g_key)
        if st_a.size:  # time-weighted in-flight requests: only the slices this batch spans
            lo = max(0, int(index(np.asarray([st_a.min()]))[0]))
            hi = min(n - 1, int(index(np.asarray([en_a.max()]))[0]))
            for i in range(lo, hi + 1):
                a, e = float(edges[i]), float(edges[i + 1])
                busy[i] += float(np.clip(np.minimum(en_a, e) - np.maximum(st_a, a), 0, None).sum())
    ttft.plan()
    itl.plan()
    for bt in inp.batches():  # the second pass: exact keys near each slice's p50 and p99 only
        t_idx, t_key, g_idx, g_key = keyed(bt, bt.chunk_times_s() + off, bt.start_s[~np.isnan(bt.start_s)] + off)
        ttft.refine(t_idx, t_key)
        itl.refine(g_idx, g_key)
    eng = [m for m in inp.engine_metrics if isinstance(m.get("t"), (int, float))]
    eng_idx = index(np.asarray([float(m["t"]) for m in eng]))
    out: list[dict[str, Any]] = []
    for i in range(n):
        a, b = float(edges[i]), float(edges[i + 1])
        dur = max(b - a, 1e-9)
        row: dict[str, Any] = {
            "t_s": rnd(a - t0, 2),
            "duration_s": rnd(dur, 2),
            "requests": int(done[i]),
            "rps": rnd(done[i] / dur),
            "output_tps": rnd(float(tokens[i]) / dur, 1),
            "ttft_p50_ms": key_ms(ttft.percentile(i, 50.0)),
            "ttft_p99_ms": key_ms(ttft.percentile(i, 99.0)),
            "itl_p50_ms": key_ms(itl.percentile(i, 50.0)),
            "itl_p99_ms": key_ms(itl.percentile(i, 99.0)),
            "in_flight_mean": rnd(float(busy[i]) / dur, 2),
        }
        rows = [m for m, j in zip(eng, eng_idx, strict=True) if j == i]
        for key in ("kv_usage", "waiting", "running"):
            vals = [float(m[key]) for m in rows if isinstance(m.get(key), (int, float))]
            row[f"{key}_mean"] = rnd(float(np.mean(vals)), 4) if vals else None
            row[f"{key}_max"] = rnd(max(vals), 4) if vals else None
        gpu = [g for g in (gpu_used_bytes(m) for m in rows) if g is not None]
        row["gpu_used_gib"] = rnd(max(gpu) / (1 << 30), 3) if gpu else None
        out.append(row)
    return out


def gpu_used_bytes(row: dict[str, Any]) -> float | None:
    """GPU memory used in one scrape line: NVML's per-GPU list summed, else the simulator's gauge."""
    nv = row.get("gpu_used_bytes")
    if isinstance(nv, list) and nv:
        return float(sum(nv))
    sim = row.get("sim_gpu_used_bytes")
    return float(sim) if isinstance(sim, (int, float)) else None


def steady_state(slices: list[dict[str, Any]]) -> dict[str, Any]:
    """Compare the first and last full slice per metric against the slice-to-slice noise.

    Noise: the robust spread of successive differences with their median (the trend) removed,
    divided by sqrt(2) (a difference of two slices has twice one slice's variance). A change is
    drift when it exceeds 3 x sqrt(2) x that noise and the metric's floors.
    """
    if len(slices) < 3:
        return {"checked": False, "drift": False, "reason": f"{len(slices)} full slice(s): at least 3 are needed"}
    drifted: list[dict[str, Any]] = []
    for key, (label, means, rel, floor) in CHECKED.items():
        xs = [s.get(key) for s in slices]
        if any(not isinstance(x, (int, float)) for x in xs):
            continue
        arr = np.asarray(xs, dtype=float)
        d = np.diff(arr)
        sigma = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
        change = float(arr[-1] - arr[0])
        limit = max(3 * math.sqrt(2) * sigma, rel * max(abs(arr[0]), abs(arr[-1])), floor)
        if abs(change) > limit:
            drifted.append(
                {
                    "metric": key,
                    "label": label,
                    "first": rnd(arr[0]),
                    "last": rnd(arr[-1]),
                    "change": rnd(change),
                    "noise": rnd(sigma),
                    "means": means,
                }
            )
    out: dict[str, Any] = {"checked": True, "drift": bool(drifted), "slices": len(slices), "drifted": drifted}
    if drifted:
        parts = [f"{d['label']} {_fmt(d['first'])} -> {_fmt(d['last'])} ({d['means']})" for d in drifted[:3]]
        out["message"] = (
            "not in steady state: first vs last slice differ beyond noise: "
            + "; ".join(parts)
            + "; lengthen the warmup or the window"
        )
    return out


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.3g}" if abs(x) < 100 else f"{x:,.0f}"


ANALYSES.add("timeslices", Timeslices())
