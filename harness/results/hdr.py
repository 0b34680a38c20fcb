"""Read the run directory's encoded HDR histograms as plain numpy arrays.

`histograms.json` holds base64 HDR V2 blobs (hdrh `encode()`); latencies are integer
nanoseconds, `tokens_per_chunk` is tokens. Asking hdrh for each percentile walks every bucket
(~1.5 ms a call), so a histogram is turned once into (value, count) arrays and every quantile
after that is a `searchsorted`.
"""

from __future__ import annotations

import binascii
import zlib
from dataclasses import dataclass

import numpy as np
from hdrh.histogram import HdrHistogram

from harness.metrics import percentile

#: the x positions of a percentile plot: 0, 90, 99, 99.9, 99.99 sit at 0, 1, 2, 3, 4
TAIL_TICKS = ((0.0, "0%"), (0.30103, "50%"), (1.0, "90%"), (2.0, "99%"), (3.0, "99.9%"), (4.0, "99.99%"))


@dataclass(frozen=True)
class Hist:
    """Distinct recorded values (ascending) and their counts."""

    values: np.ndarray  # float64, in the histogram's unit
    counts: np.ndarray  # int64

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def quantile(self, pct: float | np.ndarray) -> float | np.ndarray:
        """Value at percentile(s) `pct` (0-100) by nearest rank (harness.metrics.percentile): the
        smallest recorded value whose cumulative count reaches ceil(pct/100 * total)."""
        return percentile.of_counts(self.values, self.counts, pct)

    def mean(self) -> float:
        return float((self.values * self.counts).sum() / self.counts.sum())

    def scaled(self, factor: float) -> Hist:
        return Hist(self.values * factor, self.counts)


class HistogramError(ValueError):
    """A blob that is not a readable HDR histogram."""


def decode(blob: str | bytes) -> Hist:
    """Decode one base64 HDR V2 blob into arrays; raises HistogramError when unreadable."""
    if isinstance(blob, str):
        blob = blob.encode()
    try:
        h = HdrHistogram.decode(blob)
    except (binascii.Error, zlib.error, ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
        raise HistogramError(str(exc) or type(exc).__name__) from exc
    if h is None:
        raise HistogramError("empty or unreadable blob")
    values: list[float] = []
    counts: list[int] = []
    for item in h.get_recorded_iterator():
        values.append(float(h.get_highest_equivalent_value(item.value_iterated_to)))
        counts.append(int(item.count_added_in_this_iter_step))
    if not values:
        return Hist(np.zeros(0), np.zeros(0, dtype=np.int64))
    return Hist(np.asarray(values), np.asarray(counts, dtype=np.int64))


def from_values(values: np.ndarray | list[float]) -> Hist:
    """Exact 'histogram' of raw samples (used when histograms.json is missing)."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return Hist(np.zeros(0), np.zeros(0, dtype=np.int64))
    uniq, counts = np.unique(arr, return_counts=True)
    return Hist(uniq, counts.astype(np.int64))


def percentile_curve(hist: Hist, max_tail: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """(x, value) for a percentile plot: x = -log10(1 - p), p from 0 up to the last percentile the
    samples can speak for (1 - 1/count), capped at 99.99 % (x = 4)."""
    n = hist.total
    if n == 0:
        return np.zeros(0), np.zeros(0)
    x_end = min(max_tail, np.log10(n)) if n > 1 else 0.0
    x = np.linspace(0.0, x_end, max(2, int(x_end * 60) + 1))
    pct = 100.0 * (1.0 - 10.0 ** (-x))
    return x, np.asarray(hist.quantile(pct), dtype=float)


def encode_values_b64(values: list[int] | np.ndarray, lowest: int = 1, highest: int = 3_600_000_000_000) -> str:
    """Encode integer samples as an HDR V2 base64 string (tests and fixtures use this)."""
    h = HdrHistogram(lowest, highest, 3)
    arr = np.clip(np.asarray(values, dtype=np.float64), lowest, highest)
    # round to 4 significant figures (finer than the histogram's 3) and record each value once with its count
    mag = 10.0 ** (np.floor(np.log10(arr)) - 3)
    uniq, counts = np.unique(np.round(arr / mag) * mag, return_counts=True)
    for v, c in zip(uniq, counts, strict=True):
        h.record_value(int(min(max(int(v), lowest), highest)), int(c))
    out = h.encode()
    return out.decode() if isinstance(out, bytes) else str(out)


__all__ = ["TAIL_TICKS", "Hist", "HistogramError", "decode", "encode_values_b64", "from_values", "percentile_curve"]
