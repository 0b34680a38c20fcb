"""Noise estimates for comparing two sides: bootstrap intervals of a difference.

Every function returns bootstrap draws of one side's statistic (B values); the caller takes
candidate draws minus baseline draws and reads the 2.5/97.5 % points: the interval of the
difference. Tricks that keep this fast on 100k-request runs:

- A percentile of a resample is an order statistic: the k-th smallest of n indices drawn
  uniformly is floor(n * U(k)) with U(k) ~ Beta(k, n - k + 1), so B resampled percentiles cost
  B Beta draws after one sort, not B sorts.
- Requests are not independent either: requests that ran at the same time shared the same
  batches, the same long prefill and the same host stall, so a run's slow moment moves many of
  them together. Latency percentiles (and ITL gaps) are therefore resampled in time blocks:
  the run's requests in send order are cut into contiguous blocks (`time_blocks`) and whole
  blocks are drawn (a cluster bootstrap with Poisson(1) weights per block). Resampling single
  requests treats a 2-second stall that slowed 40 requests as 40 independent bad draws, and gave
  95% intervals that excluded zero for two identical runs (TTFT p99 +0.4..+21.4%, audit).
- Throughput has no per-request value: the run is cut into time slices and the slices' rates
  are resampled (batch means).

`p_value` turns bootstrap draws of a difference into a two-sided p-value of "no difference";
`holm` adjusts a family of them (every metric of one comparison) so that the chance of any
false alarm in the family stays at the level, not the level per metric.
"""

from __future__ import annotations

from math import comb
from typing import Any

import numpy as np

from harness.metrics import percentile
from harness.results import hdr

#: blocks per run for the time-block bootstrap: at most this many (a stable interval needs tens
#: of blocks), each at least one median request long (requests that overlapped share a block)
MAX_BLOCKS = 30
MIN_BLOCKS = 8


def time_blocks(requests: list[dict[str, Any]], first: int = 0) -> np.ndarray:
    """Block id (from `first`) of each request, in the given order: the span of start times
    (intended send, else actual send) cut into equal blocks, each at least as long as the median
    request (E2E), at most MAX_BLOCKS of them and no fewer than MIN_BLOCKS where the run allows
    (a window only a few requests long gets short blocks: there is no other way to resample it).
    Requests without a start time take the block of the record before them (records are written
    as requests finish, close to start order)."""
    n = len(requests)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.asarray([_start(q) for q in requests], dtype=float)
    if np.isnan(starts).all():
        return first + np.minimum((np.arange(n) * min(MAX_BLOCKS, n)) // n, n - 1)
    idx = np.where(~np.isnan(starts), np.arange(n), 0)
    np.maximum.accumulate(idx, out=idx)
    starts = starts[idx]
    starts[np.isnan(starts)] = np.nanmin(starts)
    lo, span = float(starts.min()), float(starts.max() - starts.min())
    e2e = [float(q["e2e_ms"]) * 1e6 for q in requests if isinstance(q.get("e2e_ms"), (int, float))]
    median = float(np.median(e2e)) if e2e else 0.0
    k = MAX_BLOCKS if median <= 0 else int(span // median)
    k = int(min(MAX_BLOCKS, n, max(min(MIN_BLOCKS, n), k)))
    if span <= 0 or k <= 1:
        return first + np.zeros(n, dtype=np.int64)
    return first + np.minimum(((starts - lo) / span * k).astype(np.int64), k - 1)


def _start(q: dict[str, Any]) -> float:
    v = q.get("intended_ns") if q.get("intended_ns") is not None else q.get("sent_ns")
    return float(v) if isinstance(v, (int, float)) else float("nan")


def p_value(diff_draws: np.ndarray) -> float:
    """Two-sided p-value of 'no difference' from bootstrap draws of the difference: the normal
    tail of (mean of the draws) / (their standard deviation). The draws' own tail share would
    be the exact percentile-bootstrap p, but 500-2000 draws cannot resolve the small p-values a
    family-wise correction asks for (0.05 / 11 metrics = 0.0045 is 2 draws of 500), so the
    smooth normal tail is used; the percentile interval still has to exclude zero."""
    d = np.asarray(diff_draws, dtype=float)
    d = d[np.isfinite(d)]
    if d.size < 2:
        return 1.0
    sd = float(d.std(ddof=1))
    mean = float(d.mean())
    if sd <= 0:
        return 1.0 if mean == 0 else 0.0
    from statistics import NormalDist

    return float(min(1.0, 2.0 * NormalDist().cdf(-abs(mean) / sd)))


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment: the i-th smallest of m p-values is multiplied by (m - i),
    and adjusted values never decrease in that order. Rejecting where the adjusted value is below
    the level keeps the chance of ANY false rejection in the family at the level (no assumption
    about how the metrics depend on each other: TTFT, E2E and goodput move together)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def quantile_draws(values: np.ndarray, pct: float, B: int, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """(point estimate, B bootstrap draws) of the `pct` percentile of iid samples."""
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    k = percentile.rank(pct, n)
    u = rng.beta(k, n - k + 1, size=B)
    idx = np.minimum((u * n).astype(np.int64), n - 1)
    return float(x[k - 1]), x[idx]


def mean_draws(values: np.ndarray, B: int, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """(mean, B draws) via a Bayesian bootstrap (Dirichlet weights) in chunks, exact for small n and
    normal-approximated above 5k samples where the two agree."""
    x = np.asarray(values, dtype=float)
    n = x.size
    m = float(x.mean())
    if n > 5_000:
        se = float(x.std(ddof=1)) / np.sqrt(n)
        return m, rng.normal(m, se, size=B)
    out = np.empty(B)
    step = max(1, 2_000_000 // max(n, 1))
    for i in range(0, B, step):
        j = min(B, i + step)
        w = rng.dirichlet(np.ones(n), size=j - i)
        out[i:j] = w @ x
    return m, out


def hist_quantile_draws(
    h: hdr.Hist, pct: float | str, n_eff: int, B: int, rng: np.random.Generator
) -> tuple[float, np.ndarray]:
    """Draws of a histogram's percentile as if it held `n_eff` independent samples (used for ITL
    when per-request gaps are unavailable: n_eff = requests, a conservative effective size)."""
    n = max(2, int(n_eff))
    if pct == "mean":
        point = h.mean()
        var = float(((h.values - point) ** 2 * h.counts).sum() / max(1, h.total - 1))
        return point, rng.normal(point, np.sqrt(var / n), size=B)
    p = float(pct)
    k = percentile.rank(p, n)
    u = rng.beta(k, n - k + 1, size=B)
    return float(h.quantile(p)), np.asarray(h.quantile(100.0 * u), dtype=float)


def itl_gaps(requests: list[dict[str, Any]], per: str = "token") -> tuple[np.ndarray, np.ndarray] | None:
    """(gap ms, request index) from chunk_offsets_us/chunk_tokens; None when records lack them."""
    vals: list[float] = []
    owner: list[int] = []
    seen = 0
    for i, r in enumerate(requests):
        offs = r.get("chunk_offsets_us")
        toks = r.get("chunk_tokens")
        if r.get("error") or not isinstance(offs, list) or len(offs) < 2:
            continue
        seen += 1
        for j in range(1, len(offs)):
            gap_ms = (offs[j] - offs[j - 1]) / 1000.0
            k = int(toks[j]) if per == "token" and isinstance(toks, list) and j < len(toks) and toks[j] else 1
            vals.extend([gap_ms / k] * k)
            owner.extend([i] * k)
    if seen < 2:
        return None
    return np.asarray(vals), np.asarray(owner, dtype=np.int64)


def cluster_quantile_draws(
    gaps: tuple[np.ndarray, np.ndarray], pcts: list[float | str], B: int, rng: np.random.Generator
) -> dict[float | str, tuple[float, np.ndarray]]:
    """Percentiles (or "mean") of pooled gaps, resampling whole requests (Poisson(1) weights)."""
    vals, owner = gaps
    order = np.argsort(vals, kind="stable")
    v = vals[order]
    o = owner[order]
    _, o = np.unique(o, return_inverse=True)
    n_req = int(o.max()) + 1
    out: dict[float | str, tuple[float, list[float]]] = {}
    for p in pcts:
        if p == "mean":
            out[p] = (float(v.mean()), [])
        else:
            out[p] = (float(v[percentile.rank(float(p), int(v.size)) - 1]), [])
    step = int(max(1, min(B, 4_000_000 // max(1, v.size))))  # resamples per vectorized chunk
    done = 0
    while done < B:
        k = min(step, B - done)
        done += k
        w = rng.poisson(1.0, (k, n_req)).astype(np.float32)[:, o]  # (k, gaps), sorted by gap value
        cum = np.cumsum(w, axis=1)
        total = cum[:, -1]
        ok = total > 0
        for p in pcts:
            if p == "mean":
                vals = (w @ v.astype(np.float32)) / np.where(ok, total, 1)
            else:
                # weights are integers, so the first cum >= p/100*total is the nearest rank
                target = np.maximum(1.0, float(p) / 100.0 * total)
                idx = np.minimum((cum < target[:, None]).sum(axis=1), v.size - 1)
                vals = v[idx]
            out[p][1].extend(np.asarray(vals)[ok].tolist())
    return {p: (pt, np.asarray(d, dtype=float)) for p, (pt, d) in out.items()}


def slice_rates(
    runs_requests: list[list[dict[str, Any]]], quantity: str, good: list[list[bool]] | None = None, slices: int = 10
) -> np.ndarray:
    """Per-time-slice rates (per second) of `quantity` over each run's completions, pooled."""
    out: list[float] = []
    for ri, reqs in enumerate(runs_requests):
        ends: list[float] = []
        amounts: list[float] = []
        for j, r in enumerate(reqs):
            if r.get("error") or not isinstance(r.get("e2e_ms"), (int, float)):
                continue
            start = r.get("intended_ns") if r.get("intended_ns") is not None else r.get("sent_ns")
            if not isinstance(start, (int, float)):
                continue
            ends.append(float(start) / 1e9 + float(r["e2e_ms"]) / 1e3)
            if quantity == "requests":
                amounts.append(1.0)
            elif quantity == "good":
                amounts.append(1.0 if good is not None and good[ri][j] else 0.0)
            else:
                amounts.append(float(r.get(quantity) or 0))
        if len(ends) < 6:
            continue
        e = np.asarray(ends)
        a = np.asarray(amounts)
        lo, hi = float(e.min()), float(e.max())
        if hi <= lo:
            continue
        k = int(min(slices, max(3, len(ends) // 5)))
        edges = np.linspace(lo, hi, k + 1)
        sums, _ = np.histogram(e, bins=edges, weights=a)
        out.extend((sums / (edges[1] - edges[0])).tolist())
    return np.asarray(out)


def slice_mean_draws(rates: np.ndarray, B: int, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    idx = rng.integers(0, rates.size, size=(B, rates.size))
    return float(rates.mean()), rates[idx].mean(axis=1)


def interval(diff_draws: np.ndarray, confidence: float) -> tuple[float, float]:
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(diff_draws, [a, 1.0 - a])
    return float(lo), float(hi)


def proportion_diff_interval(k1: int, n1: int, k2: int, n2: int, confidence: float) -> tuple[float, float] | None:
    """Normal interval of p2 - p1 (Wald, with a +1/+2 correction so 0/n is not certain)."""
    test = proportion_diff_test(k1, n1, k2, n2, confidence)
    return None if test is None else (test[0], test[1])


def proportion_diff_test(k1: int, n1: int, k2: int, n2: int, confidence: float) -> tuple[float, float, float] | None:
    """(low, high, two-sided p) of p2 - p1: the Wald interval above and its normal p-value."""
    if n1 <= 0 or n2 <= 0:
        return None
    from statistics import NormalDist

    nd = NormalDist()
    z = nd.inv_cdf(0.5 + confidence / 2.0)
    p1 = (k1 + 1) / (n1 + 2)
    p2 = (k2 + 1) / (n2 + 2)
    se = float(np.sqrt(p1 * (1 - p1) / (n1 + 2) + p2 * (1 - p2) / (n2 + 2)))
    d = k2 / n2 - k1 / n1
    p = 2.0 * (1.0 - nd.cdf(abs(d) / se)) if se > 0 else (1.0 if d == 0 else 0.0)
    return float(d - z * se), float(d + z * se), float(p)


def fisher_greater(k_b: int, n_b: int, k_c: int, n_c: int) -> float:
    """One-sided Fisher exact p-value that the candidate's share of good requests (k_c of n_c)
    exceeds the baseline's (k_b of n_b): the chance of k_c or more good ones among the candidate's
    n_c when the k_b + k_c good requests fall at random between the two sides."""
    total, good = n_b + n_c, k_b + k_c
    denom = comb(total, n_c)
    return sum(comb(good, k) * comb(total - good, n_c - k) for k in range(k_c, min(good, n_c) + 1)) / denom


def repeats_separated(base: list[float], cand: list[float], worse_is_higher: bool) -> tuple[bool, bool, float]:
    """(candidate all worse, candidate all better, permutation p of that order by chance)."""
    if not base or not cand:
        return False, False, 1.0
    p = 1.0 / comb(len(base) + len(cand), len(base))
    if worse_is_higher:
        return min(cand) > max(base), max(cand) < min(base), p
    return max(cand) < min(base), min(cand) > max(base), p
