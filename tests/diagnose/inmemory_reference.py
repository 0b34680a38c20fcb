"""The post-run analyses as they were before they streamed (harness main at 1dccff5): every
measured request held as a dict. Kept only to prove the streamed analyses give the same figures
(tests/diagnose/test_streamed_equals_inmemory.py); not part of the product."""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.diagnose.base import DiagnoseOptions, _start_ns, chunk_times_s, pct, rnd, start_ns
from harness.diagnose.interference import MAX_PLOT_POINTS, _engine_side, _merge, _verdict, long_threshold, overlaps
from harness.diagnose.timeslices import gpu_used_bytes, steady_state
from harness.results.layout import write_text_atomic
from harness.results.models.summary import RunSummary


@dataclass
class RunInputs:
    root: Path  # where the reference writes its timeslices.json / interference.json
    summary: RunSummary
    options: DiagnoseOptions
    requests: list[dict[str, Any]] = field(default_factory=list)  # measured requests only
    engine_metrics: list[dict[str, Any]] = field(default_factory=list)

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


class Timeslices:
    FILE = "timeslices.json"

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
            write_text_atomic(inp.root / self.FILE, json.dumps({"slice_s": width, "slices": slices}, indent=1) + "\n")
        return {"slice_s": width, "count": len(slices), "file": self.FILE, "steady_state": drift}


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


class Interference:
    FILE = "interference.json"

    def analyze(self, inp: RunInputs) -> dict[str, Any] | None:
        reqs = [r for r in inp.requests if not r.get("error") and r.get("chunk_offsets_us")]
        if not reqs:
            return None
        lengths = np.asarray([_prompt_len(r) for r in reqs], dtype=float)
        threshold = long_threshold(lengths, inp.options.long_prompt_tokens)
        prefills: list[tuple[float, float]] = []
        for r, n in zip(reqs, lengths, strict=True):
            if n >= threshold:
                ct = chunk_times_s(r)
                sent = r.get("sent_ns")
                if ct.size and isinstance(sent, (int, float)):
                    prefills.append((sent / 1e9, float(ct[0])))
        a_list, b_list = [], []
        for r in reqs:
            ct = chunk_times_s(r)
            if ct.size > 1:
                a_list.append(ct[:-1])
                b_list.append(ct[1:])
        if not a_list:
            return None
        a, b = np.concatenate(a_list), np.concatenate(b_list)
        gaps = (b - a) * 1e3
        block: dict[str, Any] = {
            "long_prompt_tokens": threshold,
            "long_prefills": len(prefills),
            "gaps": int(gaps.size),
            "spike_factor": inp.options.spike_factor,
        }
        if not prefills:
            block["verdict"] = "none"
            block["message"] = f"no prompt of {threshold}+ tokens in the window: nothing to interfere with decoding"
            return block
        starts, ends = _merge(prefills)
        inside = overlaps(a, b, starts, ends)
        med = float(np.median(gaps))
        spike = gaps > inp.options.spike_factor * med
        gi, go = gaps[inside], gaps[~inside]
        block.update(
            {
                "itl_median_ms": rnd(med),
                "inside": {"count": int(gi.size), "p50_ms": rnd(pct(gi, 50)), "p99_ms": rnd(pct(gi, 99))},
                "outside": {"count": int(go.size), "p50_ms": rnd(pct(go, 50)), "p99_ms": rnd(pct(go, 99))},
                "inside_share_of_gaps": rnd(float(inside.mean()), 4),
                "spikes": int(spike.sum()),
                "spikes_inside": int((spike & inside).sum()),
                "spike_share_inside": rnd(float((spike & inside).sum() / spike.sum()), 4) if spike.any() else None,
            }
        )
        p_in, p_out = block["inside"]["p99_ms"], block["outside"]["p99_ms"]
        ratio = p_in / p_out if p_in is not None and p_out else None
        block["p99_ratio"] = rnd(ratio, 2)
        block.update(_verdict(block, ratio))
        block["engine"] = _engine_side(inp.summary)
        _write_plot_data(inp, a, b, gaps, spike, inside, prefills)
        block["file"] = self.FILE
        return block


def _prompt_len(r: dict[str, Any]) -> float:
    for key in ("input_tokens", "intended_input_tokens"):
        v = r.get(key)
        if isinstance(v, (int, float)):
            return float(v)
    return 0.0


def _write_plot_data(
    inp: RunInputs,
    a: np.ndarray,
    b: np.ndarray,
    gaps: np.ndarray,
    spike: np.ndarray,
    inside: np.ndarray,
    prefills: list[tuple[float, float]],
) -> None:
    off = inp.clock_offset_s()
    w = inp.window
    base = (w[0] - off) if (w is not None and off is not None) else float(min(a.min(), min(p[0] for p in prefills)))
    idx = np.flatnonzero(spike)
    if idx.size > MAX_PLOT_POINTS:
        idx = idx[np.argsort(gaps[idx])[-MAX_PLOT_POINTS:]]
    data = {
        "t0_note": "seconds since the window opened",
        "spikes": [[round(float(b[i] - base), 4), round(float(gaps[i]), 3), bool(inside[i])] for i in sorted(idx)],
        "prefills": [[round(s - base, 4), round(e - base, 4)] for s, e in prefills[:MAX_PLOT_POINTS]],
        "median_ms": round(float(np.median(gaps)), 3),
    }
    with contextlib.suppress(OSError):  # a full disk leaves no empty file
        write_text_atomic(inp.root / Interference.FILE, json.dumps(data) + "\n")
