"""Prefill/decode interference, from the client's own stamps.

A long prompt's prefill runs from its send until its first token comes back. Every decoding
stream's inter-chunk gaps that overlap such an interval are "inside" a prefill; the rest are
"outside". When long prefills block decode steps (no chunked prefill, or a large token budget),
the inside gaps are much longer: the ITL p99 inside vs outside, and the share of ITL spikes
(gaps above `spike_factor` x the median) that fall inside compared with the share of all gaps
that do (what chance alone would give), measure it. This is guide 001's test for chunked
prefill (1.1) and for disaggregation (3.3: "ITL spikes correlated with prefill arrivals").

The spike times and prefill intervals go to `interference.json` for the report's time plot.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import numpy as np

from harness.diagnose.base import ANALYSES, RunInputs, chunk_times_s, pct, rnd
from harness.results.layout import write_text_atomic
from harness.results.models.summary import RunSummary

FILE = "interference.json"
#: points kept for the time plot (the summary's figures use every gap)
MAX_PLOT_POINTS = 5000


def long_threshold(lengths: np.ndarray, fixed: int | None) -> int:
    if fixed is not None:
        return int(fixed)
    med = float(np.median(lengths)) if lengths.size else 0.0
    return int(max(1024, 4 * med))


def _merge(intervals: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    intervals = sorted(i for i in intervals if i[1] > i[0])
    starts: list[float] = []
    ends: list[float] = []
    for a, b in intervals:
        if starts and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return np.asarray(starts), np.asarray(ends)


def overlaps(a: np.ndarray, b: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For gaps [a, b): does any merged interval [start, end) overlap it?"""
    if starts.size == 0 or a.size == 0:
        return np.zeros(a.size, dtype=bool)
    j = np.searchsorted(starts, b, side="left") - 1  # last interval starting before the gap ends
    ok = j >= 0
    out = np.zeros(a.size, dtype=bool)
    out[ok] = ends[j[ok]] > a[ok]
    return out


class Interference:
    name = "interference"

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
        block["file"] = FILE
        return block


def _prompt_len(r: dict[str, Any]) -> float:
    for key in ("input_tokens", "intended_input_tokens"):
        v = r.get(key)
        if isinstance(v, (int, float)):
            return float(v)
    return 0.0


def _verdict(b: dict[str, Any], ratio: float | None) -> dict[str, Any]:
    share, chance = b.get("spike_share_inside"), b.get("inside_share_of_gaps") or 0.0
    if b["inside"]["count"] < 20 or ratio is None:
        return {
            "verdict": "too few",
            "message": f"only {b['inside']['count']} ITL gaps overlapped a long prefill: too few to judge",
        }
    correlated = share is not None and b["spikes"] >= 5 and share >= max(0.5, 1.5 * chance)
    strong = ratio >= 2.0 and correlated
    text = (
        f"ITL p99 {b['inside']['p99_ms']:.1f} ms while a long prefill ({b['long_prompt_tokens']}+ tokens) runs vs "
        f"{b['outside']['p99_ms']:.1f} ms outside ({ratio:.1f}x)"
    )
    if share is not None:
        text += f"; {share:.0%} of ITL spikes coincide with a prefill ({chance:.0%} of all gaps do)"
    return {"verdict": "interference" if strong else "mild" if ratio >= 1.3 else "none", "message": text}


def _engine_side(summary: RunSummary) -> dict[str, Any] | None:
    """The engine's own ITL (and per-iteration figures where exposed), shown beside the client's."""
    out = {
        k: {
            "p50_ms": rnd(v.p50),
            "p99_ms": rnd(v.p99),
            # a quantile inside the first bucket is null: the bucket says "below its bound"
            **{f"{q}_bucket_ms": b for q, b in (("p50", v.p50_bucket_ms), ("p99", v.p99_bucket_ms)) if b},
        }
        for k, v in summary.engine.engine_latency_ms.items()
        if k in ("itl", "prefill", "decode")
    }
    return out or None


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
        write_text_atomic(inp.root / FILE, json.dumps(data) + "\n")


ANALYSES.add("interference", Interference())
