"""Closed-loop back-off after a refused or failed request (429, 5xx, no connection).

Why: a closed-loop user that retries at once turns an overloaded or erroring server into a
storm (16-25k requests in 3 s from 2 users in the audit), which measures nothing and floods the
run's files. The delay doubles from 50 ms to 2 s with jitter (so users do not retry in step)
and a server's `Retry-After` (seconds or an HTTP date) is honoured up to 30 s. Open loop never
backs off: its arrival schedule is the load being measured.
"""

from __future__ import annotations

import random
import time
from email.utils import parsedate_to_datetime

BASE_S = 0.05
CAP_S = 2.0
RETRY_AFTER_CAP_S = 30.0


def should_back_off(status: int | None, error_kind: str | None) -> bool:
    """Back off after 429, a 5xx, or a failed connection; not after other errors."""
    if error_kind in ("connect", "connect_timeout"):
        return True
    return status is not None and (status == 429 or status >= 500)


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds a Retry-After header asks for (delta-seconds or HTTP date); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def delay_s(failures: int, retry_after: str | None = None, rng: random.Random | None = None) -> float:
    """How long to wait after the `failures`-th failure in a row (1-based)."""
    asked = retry_after_s(retry_after)
    if asked is not None:
        return asked
    ceiling = min(CAP_S, BASE_S * 2 ** max(failures - 1, 0))
    return ceiling * (0.5 + 0.5 * (rng or random).random())  # "equal jitter": at least half the step
