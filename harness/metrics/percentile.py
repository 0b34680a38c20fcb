"""The one percentile definition every figure uses: nearest rank, which never understates a tail.

The p-th percentile of N samples is the k-th smallest with k = ceil(p/100 * N) (at least 1):
the smallest sample that at least p % of the samples are at or below. Other definitions
understate tails at small N: hdrh's `get_value_at_percentile` rounds the rank (int(p/100*N +
0.5)), so with 152 samples its p99 is the 150th value, at or above only 98.7 % of them;
numpy's default interpolates between the 150th and 151st. Nearest rank gives the 151st.

Summary, report, compare, CSV/JSON exports, the web UI and the partial summary all reach a
percentile through this module: `rank` for the arithmetic, `of_values` for raw samples,
`of_counts` for a histogram's (value, count) arrays (harness.metrics.hdr wraps HdrHistogram with
it). Percentages are given with at most six decimals (99.9999); the rank is computed in integers
so 99 % of 100 samples is the 99th value, not the 100th by a float rounding.
"""

from __future__ import annotations

import math

import numpy as np

#: percentages are read to this many parts of a percent (six decimals): exact integer ranks
_SCALE = 1_000_000


def rank(pct: float, n: int) -> int:
    """The 1-based nearest rank of percentile `pct` (0-100) among `n` samples: ceil(pct/100*n),
    clamped to [1, n] (0 when n is 0)."""
    if n <= 0:
        return 0
    if not math.isfinite(pct):
        raise ValueError(f"percentile {pct!r} is not a number")
    scaled = round(min(max(pct, 0.0), 100.0) * _SCALE)
    k = -(-scaled * n // (100 * _SCALE))  # ceil in integers
    return min(n, max(1, k))


def ranks(pcts: np.ndarray | list[float], n: int) -> np.ndarray:
    """`rank` for many percentiles at once (plots ask for hundreds)."""
    p = np.clip(np.asarray(pcts, dtype=float), 0.0, 100.0)
    scaled = np.rint(p * _SCALE).astype(np.int64)
    if n <= 0:
        return np.zeros(scaled.shape, dtype=np.int64)
    k = -(-(scaled * np.int64(n)) // np.int64(100 * _SCALE))
    out: np.ndarray = np.clip(k, 1, n)
    return out


def of_values(values: np.ndarray | list[float], pct: float) -> float | None:
    """Nearest-rank percentile of raw samples (None when there are none; NaNs are dropped)."""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return None
    k = rank(pct, int(arr.size))
    return float(np.partition(arr, k - 1)[k - 1])


def of_values_many(values: np.ndarray | list[float], pcts: list[float] | tuple[float, ...]) -> list[float | None]:
    """`of_values` for several percentiles with one sort."""
    arr = np.asarray(values, dtype=float)
    arr = np.sort(arr[~np.isnan(arr)])
    if arr.size == 0:
        return [None] * len(pcts)
    return [float(arr[rank(p, int(arr.size)) - 1]) for p in pcts]


def of_counts(values: np.ndarray, counts: np.ndarray, pct: float | np.ndarray) -> float | np.ndarray:
    """Nearest-rank percentile(s) of a histogram given as ascending `values` with their `counts`:
    the value whose cumulative count first reaches the rank."""
    cum = np.cumsum(counts)
    total = int(cum[-1]) if cum.size else 0
    if total == 0:
        raise ValueError("an empty histogram has no percentiles")
    target = ranks(np.atleast_1d(pct), total)
    idx = np.minimum(np.searchsorted(cum, target, side="left"), len(cum) - 1)
    out = np.asarray(values)[idx]
    return float(out[0]) if np.ndim(pct) == 0 else out


__all__ = ["of_counts", "of_values", "of_values_many", "rank", "ranks"]
