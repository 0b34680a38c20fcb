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

from harness.diagnose.base import ANALYSES, RunInputs, chunk_times_s, pct, rnd, start_ns
from harness.results.layout import write_text_atomic

FILE = "timeslices.json"

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


def _groups(idx: np.ndarray, values: np.ndarray, n: int) -> list[np.ndarray]:
    keep = (idx >= 0) & (idx < n)
    idx, values = idx[keep], values[keep]
    order = np.argsort(idx, kind="stable")
    idx, values = idx[order], values[order]
    bounds = np.searchsorted(idx, np.arange(n + 1))
    return [values[bounds[i] : bounds[i + 1]] for i in range(n)]


def compute_slices(inp: RunInputs, edges: np.ndarray, off: float) -> list[dict[str, Any]]:
    """One pass over the requests, then per-slice grouping (a long run has many of both)."""
    n = len(edges) - 1
    t0 = float(edges[0])
    starts, ends, ok, ttft = [], [], [], []
    c_t, c_tok, g_t, g_ms = [], [], [], []
    for r in inp.requests:
        s = start_ns(r)
        if s is None:
            continue
        st = s / 1e9 + off
        ct = chunk_times_s(r) + off
        starts.append(st)
        ends.append(float(ct[-1]) if ct.size else st + float(r.get("e2e_ms") or 0.0) / 1e3)
        ok.append(not r.get("error"))
        ttft.append(float(r["ttft_ms"]) if isinstance(r.get("ttft_ms"), (int, float)) else np.nan)
        if ct.size:
            toks = r.get("chunk_tokens") or []
            c_t.append(ct)
            c_tok.append(np.asarray(toks, dtype=float) if len(toks) == ct.size else np.ones(ct.size))
            if ct.size > 1:
                g_t.append(ct[1:])
                g_ms.append(np.diff(ct) * 1e3)
    st_a, en_a = np.asarray(starts), np.asarray(ends)
    ok_a, ttft_a = np.asarray(ok, dtype=bool), np.asarray(ttft)

    closed = edges.copy()
    closed[-1] += 1e-3  # the last completion closes the window: it belongs to the last slice

    def index(t: np.ndarray) -> np.ndarray:
        return np.searchsorted(closed, t, side="right") - 1 if t.size else np.empty(0, dtype=int)

    def cat(xs: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(xs) if xs else np.empty(0)

    fin_idx = index(en_a[ok_a]) if en_a.size else np.empty(0, dtype=int)
    done = np.bincount(fin_idx[(fin_idx >= 0) & (fin_idx < n)], minlength=n)
    ct_all, tok_all = cat(c_t), cat(c_tok)
    tok_groups = _groups(index(ct_all), tok_all, n)
    fin = ~np.isnan(ttft_a)
    ttft_groups = _groups(index(st_a[fin]), ttft_a[fin], n)
    itl_groups = _groups(index(cat(g_t)), cat(g_ms), n)
    eng = [m for m in inp.engine_metrics if isinstance(m.get("t"), (int, float))]
    eng_idx = index(np.asarray([float(m["t"]) for m in eng]))
    out: list[dict[str, Any]] = []
    for i in range(n):
        a, b = float(edges[i]), float(edges[i + 1])
        dur = max(b - a, 1e-9)
        busy = float(np.clip(np.minimum(en_a, b) - np.maximum(st_a, a), 0, None).sum()) if st_a.size else 0.0
        row: dict[str, Any] = {
            "t_s": rnd(a - t0, 2),
            "duration_s": rnd(dur, 2),
            "requests": int(done[i]),
            "rps": rnd(done[i] / dur),
            "output_tps": rnd(float(tok_groups[i].sum()) / dur, 1),
            "ttft_p50_ms": rnd(pct(ttft_groups[i], 50)),
            "ttft_p99_ms": rnd(pct(ttft_groups[i], 99)),
            "itl_p50_ms": rnd(pct(itl_groups[i], 50)),
            "itl_p99_ms": rnd(pct(itl_groups[i], 99)),
            "in_flight_mean": rnd(busy / dur, 2),
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
