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
from collections import Counter
from typing import Any

import numpy as np

from harness.diagnose.base import ANALYSES, Batch, RunInputs, rnd
from harness.diagnose.tally import Tally, key_ms
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
        """Passes over the requests in bounded batches: the prompt lengths and the long prompts'
        prefill intervals; when there are any, the median gap (microsecond keys:
        harness.diagnose.tally), then each gap inside or outside a merged interval."""
        lengths: Counter[float] = Counter()
        fixed = inp.options.long_prompt_tokens
        floor = int(fixed) if fixed is not None else 1024  # the threshold is never below it
        candidates: list[tuple[float, float, float]] = []  # (prompt, sent s, first chunk s), in request order
        n_gaps = 0
        first_gap_start: float | None = None
        for bt in inp.batches():
            use = bt.ok & (bt.chunks > 0)
            lengths.update(bt.prompt[use].tolist())
            ct = bt.chunk_times_s()
            starts = np.cumsum(bt.chunks) - bt.chunks
            long = use & (bt.prompt >= floor) & ~np.isnan(bt.sent_s)
            for n, sent, c0 in zip(
                bt.prompt[long].tolist(), bt.sent_s[long].tolist(), ct[starts[long]].tolist(), strict=True
            ):
                candidates.append((n, sent, c0))
            gap = _gaps(bt, use)
            if gap.any():
                n_gaps += int(gap.sum())
                a0 = float(ct[:-1][gap[1:]].min())
                first_gap_start = a0 if first_gap_start is None else min(first_gap_start, a0)
        if not lengths:
            return None
        threshold = long_threshold_of_counts(lengths, fixed)
        prefills = [(sent, c0) for n, sent, c0 in candidates if n >= threshold]
        if not n_gaps:
            return None
        block: dict[str, Any] = {
            "long_prompt_tokens": threshold,
            "long_prefills": len(prefills),
            "gaps": n_gaps,
            "spike_factor": inp.options.spike_factor,
        }
        if not prefills:
            block["verdict"] = "none"
            block["message"] = f"no prompt of {threshold}+ tokens in the window: nothing to interfere with decoding"
            return block
        p_starts, p_ends = _merge(prefills)
        gaps_all = Tally(1)  # a pass for the median gap (the spikes' yardstick)
        for bt in inp.batches():
            gap = _gaps(bt, bt.ok & (bt.chunks > 0))
            if gap.any():
                ct = bt.chunk_times_s()
                gaps_ms = (ct[1:] - ct[:-1])[gap[1:]] * 1e3
                gaps_all.add(np.zeros(gaps_ms.size, dtype=np.int64), bt.gap_keys_us(gaps_ms, gap))
        median_us = gaps_all.median(0)
        assert median_us is not None
        med = median_us / 1000
        limit = inp.options.spike_factor * med
        sides = Tally(2)  # 0: outside any prefill, 1: inside one
        spikes = _Spikes()
        n_inside = n_spike = n_spike_inside = 0
        for bt in inp.batches():
            gap = _gaps(bt, bt.ok & (bt.chunks > 0))
            if not gap.any():
                continue
            ct = bt.chunk_times_s()
            a, b = ct[:-1][gap[1:]], ct[1:][gap[1:]]
            gaps_ms = (b - a) * 1e3
            inside = overlaps(a, b, p_starts, p_ends)
            spike = gaps_ms > limit
            sides.add(inside.astype(np.int64), bt.gap_keys_us(gaps_ms, gap))
            n_inside += int(inside.sum())
            n_spike += int(spike.sum())
            n_spike_inside += int((spike & inside).sum())
            spikes.add(b[spike], gaps_ms[spike], inside[spike])
        n_out = n_gaps - n_inside
        block.update(
            {
                "itl_median_ms": rnd(med),
                "inside": _side(sides, 1, n_inside),
                "outside": _side(sides, 0, n_out),
                "inside_share_of_gaps": rnd(n_inside / n_gaps, 4),
                "spikes": n_spike,
                "spikes_inside": n_spike_inside,
                "spike_share_inside": rnd(n_spike_inside / n_spike, 4) if n_spike else None,
            }
        )
        p_in, p_out = block["inside"]["p99_ms"], block["outside"]["p99_ms"]
        ratio = p_in / p_out if p_in is not None and p_out else None
        block["p99_ratio"] = rnd(ratio, 2)
        block.update(_verdict(block, ratio))
        block["engine"] = _engine_side(inp.summary)
        _write_plot_data(inp, first_gap_start or 0.0, med, spikes, prefills)
        block["file"] = FILE
        return block


def _side(sides: Tally, g: int, count: int) -> dict[str, Any]:
    return {"count": count, "p50_ms": key_ms(sides.percentile(g, 50)), "p99_ms": key_ms(sides.percentile(g, 99))}


def _gaps(bt: Batch, use: np.ndarray) -> np.ndarray:
    """Per chunk of the batch: whether a gap ends at it (not a request's first; only `use` rows)."""
    out: np.ndarray = ~bt.first_chunk() & np.repeat(use, bt.chunks)
    return out


def long_threshold_of_counts(lengths: Counter[float], fixed: int | None) -> int:
    """`long_threshold` from the prompt lengths' counts (numpy's median of the values they count)."""
    if fixed is not None:
        return int(fixed)
    values = sorted(lengths)
    cum = np.cumsum([lengths[v] for v in values])
    n = int(cum[-1])
    lo = values[int(np.searchsorted(cum, (n - 1) // 2 + 1))]
    hi = values[int(np.searchsorted(cum, n // 2 + 1))]
    return int(max(1024, 4 * float(np.mean([lo, hi]))))


class _Spikes:
    """The spikes for the time plot, in gap order: all of them up to MAX_PLOT_POINTS, else the
    largest MAX_PLOT_POINTS (trimmed as they come, so memory stays bounded)."""

    def __init__(self) -> None:
        self.seq = 0
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.n = 0

    def add(self, t: np.ndarray, gap_ms: np.ndarray, inside: np.ndarray) -> None:
        if not t.size:
            return
        order = np.arange(self.seq, self.seq + t.size)
        self.seq += t.size
        self.parts.append((order, t, gap_ms, inside))
        self.n += t.size
        if self.n > 2 * MAX_PLOT_POINTS:
            self.parts = [self.top()]
            self.n = self.parts[0][0].size

    def top(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if not self.parts:
            empty = np.empty(0)
            return np.empty(0, dtype=np.int64), empty, empty, np.empty(0, dtype=bool)
        order, t, g, ins = (np.concatenate(c) for c in zip(*self.parts, strict=True))
        if order.size > MAX_PLOT_POINTS:
            keep = np.sort(np.argsort(g)[-MAX_PLOT_POINTS:])
            order, t, g, ins = order[keep], t[keep], g[keep], ins[keep]
        return order, t, g, ins


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
    inp: RunInputs, first_gap_start: float, med: float, spikes: _Spikes, prefills: list[tuple[float, float]]
) -> None:
    off = inp.clock_offset_s()
    w = inp.window
    first = min(first_gap_start, min(p[0] for p in prefills))
    base = (w[0] - off) if (w is not None and off is not None) else float(first)
    _order, t, g, ins = spikes.top()
    data = {
        "t0_note": "seconds since the window opened",
        "spikes": [[round(float(b - base), 4), round(float(x), 3), bool(i)] for b, x, i in zip(t, g, ins, strict=True)],
        "prefills": [[round(s - base, 4), round(e - base, 4)] for s, e in prefills[:MAX_PLOT_POINTS]],
        "median_ms": round(float(med), 3),
    }
    with contextlib.suppress(OSError):  # a full disk leaves no empty file
        write_text_atomic(inp.root / FILE, json.dumps(data) + "\n")


ANALYSES.add("interference", Interference())
