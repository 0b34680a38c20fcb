"""Exact nearest-rank percentiles of integer keys, per group, in memory bounded by the distinct keys.

Why: the post-run analyses take p50/p99 of every ITL gap per timeslice (a 1-hour run at 512
streams has 36 million gaps); holding the gaps as floats cost gigabytes in the `harness run`
parent. Their figures are printed to the microsecond (3 decimals of a millisecond), and the
stamps they come from are whole microseconds, so counting each group's values by their
microsecond key loses nothing: the k-th smallest key is the k-th smallest value rounded, because
rounding never reorders values. Memory is one (group, key) pair per distinct pair seen, whatever
the number of requests.

    t = Tally(groups=3)
    t.add(np.array([0, 0, 2]), np.array([50_001, 49_998, 10]))   # group of each value, its key
    t.percentile(0, 99)   # -> 50001 (None for a group with no values)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.metrics import percentile

#: keys are offset by this much and packed with their group into one int64 (keys are clamped to
#: +-2**39: about 6 days in microseconds)
_KEY_BITS = 40
_BIAS = 1 << (_KEY_BITS - 1)
#: significant bits of TwoPassPercentiles' coarse buckets
_BUCKET_BITS = 8
#: values buffered before they are folded into the (key, count) table
_COMPACT_AT = 1 << 19


class Tally:
    """(group, integer key) counts; percentiles per group by nearest rank."""

    __slots__ = ("_counts", "_keys", "_n_pending", "_pending", "groups")

    def __init__(self, groups: int) -> None:
        if groups >= 1 << (63 - _KEY_BITS):
            raise ValueError(f"{groups} groups: at most {1 << (63 - _KEY_BITS)}")
        self.groups = groups
        self._keys = np.empty(0, dtype=np.int64)  # packed (group, key), ascending
        self._counts = np.empty(0, dtype=np.int64)
        self._pending: list[np.ndarray] = []
        self._n_pending = 0

    def add(self, group: np.ndarray, key: np.ndarray) -> None:
        """Count `key[i]` in group `group[i]`; groups outside [0, groups) are ignored."""
        group = np.asarray(group, dtype=np.int64)
        key = np.asarray(key, dtype=np.int64)
        keep = (group >= 0) & (group < self.groups)
        if not keep.all():
            group, key = group[keep], key[keep]
        if not group.size:
            return
        packed = _pack(group, key)
        self._pending.append(packed)
        self._n_pending += packed.size
        if self._n_pending >= _COMPACT_AT:
            self._compact()

    def _compact(self) -> None:
        if not self._pending:
            return
        new = np.concatenate(self._pending)
        self._pending, self._n_pending = [], 0
        keys, counts = np.unique(new, return_counts=True)  # a sort: cheaper than an argsort
        if self._keys.size:  # fold into the table: both ascending, so a stable merge sort is quick
            keys = np.concatenate((self._keys, keys))
            counts = np.concatenate((self._counts, counts))
            order = np.argsort(keys, kind="stable")
            keys, counts = keys[order], counts[order]
            first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            keys, counts = keys[first], np.add.reduceat(counts, first)
        self._keys, self._counts = keys, counts.astype(np.int64)

    def group(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        self._compact()
        lo, hi = np.searchsorted(self._keys, [g << _KEY_BITS, (g + 1) << _KEY_BITS])
        return (self._keys[lo:hi] & ((1 << _KEY_BITS) - 1)) - _BIAS, self._counts[lo:hi]

    def count(self, g: int) -> int:
        return int(self.group(g)[1].sum())

    def percentile(self, g: int, pct: float) -> int | None:
        """Nearest-rank percentile of group `g`'s keys (harness.metrics.percentile), None when empty."""
        keys, counts = self.group(g)
        if not keys.size:
            return None
        return int(percentile.of_counts(keys, counts, pct))

    def median(self, g: int) -> float | None:
        """numpy's median of group `g`'s keys: the middle one, or the mean of the two middle ones."""
        keys, counts = self.group(g)
        n = int(counts.sum())
        if not n:
            return None
        cum = np.cumsum(counts)
        lo = int(keys[np.searchsorted(cum, (n - 1) // 2 + 1)])
        hi = int(keys[np.searchsorted(cum, n // 2 + 1)])
        return float(np.mean([lo, hi]))


class TwoPassPercentiles:
    """Exact nearest-rank percentiles per group in two passes over the data, in memory bounded by
    the number of groups (not by the values, nor their spread): pass 1 (`add`) counts each value's
    coarse bucket (8 significant bits: at most 128 buckets per power of two); `plan` finds the bucket
    holding each asked rank; pass 2 (`refine`) keeps only the keys that fall in those buckets.
    A long run's timeslices (one group each, 100,000 ITL gaps per slice) need this: exact keys
    per slice would grow with the number of slices times the spread of the gaps."""

    def __init__(self, groups: int, pcts: tuple[float, ...]) -> None:
        self.groups = groups
        self.pcts = pcts
        self.coarse = Tally(groups)
        self.fine = Tally(groups)
        self._targets: dict[tuple[int, float], tuple[int, int]] = {}  # (group, pct) -> (bucket, rank in it)
        self._wanted = np.empty(0, dtype=np.int64)  # packed (group, bucket) of the targets, ascending

    @staticmethod
    def bucket(key: np.ndarray) -> np.ndarray:
        """Each key's bucket, named by its bound nearest zero (monotone: buckets never reorder keys)."""
        key = np.asarray(key, dtype=np.int64)
        mag = np.abs(key)
        _mant, bits = np.frexp(mag.astype(float))  # exact for keys below 2**53
        shift = np.maximum(bits.astype(np.int64) - _BUCKET_BITS, 0)
        out: np.ndarray = np.sign(key) * ((mag >> shift) << shift)
        return out

    def add(self, group: np.ndarray, key: np.ndarray) -> None:
        """Pass 1."""
        self.coarse.add(group, self.bucket(key))

    def plan(self) -> None:
        """Between the passes: the bucket that holds each group's asked ranks."""
        wanted = set()
        for g in range(self.groups):
            buckets, counts = self.coarse.group(g)
            if not buckets.size:
                continue
            cum = np.cumsum(counts)
            for p in self.pcts:
                r = percentile.rank(p, int(cum[-1]))
                j = int(np.searchsorted(cum, r))
                below = int(cum[j - 1]) if j else 0
                self._targets[(g, p)] = (int(buckets[j]), r - below)
                wanted.add(_pack(g, int(buckets[j])))
        self._wanted = np.asarray(sorted(wanted), dtype=np.int64)

    def refine(self, group: np.ndarray, key: np.ndarray) -> None:
        """Pass 2: the same values again; only those in a target bucket are kept."""
        group = np.asarray(group, dtype=np.int64)
        key = np.asarray(key, dtype=np.int64)
        keep = (group >= 0) & (group < self.groups)
        group, key = group[keep], key[keep]
        mask = np.isin(_pack(group, self.bucket(key)), self._wanted)
        self.fine.add(group[mask], key[mask])

    def percentile(self, g: int, pct: float) -> int | None:
        target = self._targets.get((g, pct))
        if target is None:
            return None
        bucket, rank = target
        keys, counts = self.fine.group(g)
        inside = self.bucket(keys) == bucket
        keys, counts = keys[inside], counts[inside]
        return int(keys[int(np.searchsorted(np.cumsum(counts), rank))])


def _pack(group: Any, key: Any) -> Any:
    """(group, key) as one int64 (ascending by group, then key)."""
    return (group << _KEY_BITS) | (np.clip(key, -_BIAS, _BIAS - 1) + _BIAS)


def ms_key(value_ms: float) -> int:
    """The microsecond key of a value in ms: its 3-decimal rounding (the figures' `rnd`), times 1000."""
    return round(round(float(value_ms), 3) * 1000)


def key_ms(key: int | None) -> float | None:
    """A microsecond key back in ms, as `rnd(value, 3)` prints it."""
    return None if key is None else round(key / 1000, 3)
