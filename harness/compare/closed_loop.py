"""Goodput noise for closed-loop windows that hold only a few request lifetimes.

The compare's goodput interval resamples time slices of the run (batch means). When a request
lasts longer than a slice, as at 128 users where a request takes ~3 s and an 8-s window is cut
into ten 0.9-s slices, the slices count waves of completions and the drain's tail rather than
the rate: the interval is so wide (+15% measured, [-48, +75]%) that no real difference can be
decided. A closed loop without think time has a per-request form of the same quantity instead
(Little's law): each of the C users completes one request per E2E, so

    goodput = C x (requests within the SLOs) / (sum of their E2E times over all requests),

which a bootstrap over requests (Bayesian, exponential weights) gives an interval for that does
not depend on when in the window the completions fell. Tune's judge uses it only where the slices
are shorter than the median request, and a change still needs the compare's measured goodput to
move beyond the threshold in the same direction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# the one SLO predicate, so 'within the SLOs' means the same here as in the run's goodput
from harness.compare.runs import RunLike
from harness.compare.slo import meets_slo, slo_lookup

#: bootstrap draws; the seed keeps a decision repeatable from the same data
DRAWS = 2000
SEED = 20261202


def concurrency(runs: Sequence[RunLike]) -> int | None:
    """The users of a closed-loop run (the same on every run), else None (open loop, offline)."""
    seen = set()
    for r in runs:
        load = (r.scenario or {}).get("load") or {}
        if load.get("offline") or load.get("rate") is not None or not isinstance(load.get("concurrency"), int):
            return None
        seen.add(load["concurrency"])
    return seen.pop() if len(seen) == 1 else None


def slices_too_short(runs: Sequence[RunLike]) -> tuple[float, float] | None:
    """(slice seconds, median E2E seconds) when the compare's time slices are shorter than the
    median request on some run, else None."""
    for r in runs:
        reqs = [q for q in r.measured_requests() if not q.get("error") and isinstance(q.get("e2e_ms"), (int, float))]
        span = r.summary.window.duration_s
        if len(reqs) < 6 or not span:
            continue
        k = min(10, max(3, len(reqs) // 5))
        median = float(np.median([q["e2e_ms"] for q in reqs])) / 1000.0
        if span / k < median:
            return span / k, median
    return None


def _side(runs: Sequence[RunLike]) -> tuple[np.ndarray, np.ndarray] | None:
    e2e: list[float] = []
    good: list[float] = []
    for r in runs:
        slo_of = slo_lookup(r.scenario)
        if slo_of is None:
            return None
        for q in r.measured_requests():
            if not isinstance(q.get("e2e_ms"), (int, float)):
                continue
            e2e.append(float(q["e2e_ms"]) / 1000.0)
            good.append(1.0 if meets_slo(q, slo_of(str(q.get("class")))) else 0.0)
    if len(e2e) < 8:
        return None
    return np.asarray(e2e), np.asarray(good)


def per_request_goodput(
    base: Sequence[RunLike], cand: Sequence[RunLike], confidence: float = 0.95
) -> dict[str, Any] | None:
    """Little's-law goodput of both sides and the interval of the relative change (%), or None
    when it does not apply (open loop, slices long enough, too few requests, no SLO lookup)."""
    users = concurrency([*base, *cand])
    short = slices_too_short([*base, *cand])
    if users is None or short is None:
        return None
    b, c = _side(base), _side(cand)
    if b is None or c is None or not b[1].any():
        return None
    rng = np.random.default_rng(SEED)

    def draws(e2e: np.ndarray, good: np.ndarray) -> tuple[float, np.ndarray]:
        w = rng.exponential(1.0, size=(DRAWS, e2e.size))
        return float(users * good.sum() / e2e.sum()), users * (w @ good) / (w @ e2e)

    rb, db = draws(*b)
    rc, dc = draws(*c)
    a = (1.0 - confidence) / 2.0
    lo, hi = (float(x) for x in np.quantile(dc / db - 1.0, [a, 1.0 - a]) * 100.0)
    change = (rc / rb - 1.0) * 100.0
    return {
        "baseline": rb,
        "candidate": rc,
        "change_pct": change,
        "interval": [float(lo), float(hi)],
        "test": (
            f"closed loop at {users} users: {users} x requests within the SLOs / the sum of all requests' E2E (Little's law), "
            f"{rb:.2f} -> {rc:.2f} req/s ({change:+.1f}%, 95% interval [{lo:+.1f}, {hi:+.1f}]% by a bootstrap over requests; "
            f"the {short[0]:.1f}-s time slices are shorter than the median request of {short[1]:.1f} s)"
        ),
    }
