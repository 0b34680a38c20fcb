"""Watch failures as they are recorded: stop a hopeless run early, keep error storms out of files.

Why: a run where every request fails the same way (all 400 "maximum context length", a dead
engine's refused connections) measures nothing, and an error storm wrote tens of thousands of
identical lines into requests.jsonl. The watcher says when to stop (one clear reason) and
which error lines are repeats beyond a cap; the counts in the metrics stay exact.
"""

from __future__ import annotations

import re

from harness.metrics.record import RequestRecord

#: stop when this many requests in a row failed for one reason ...
FAIL_FAST_STREAK = 50
#: ... and at least this share of all requests so far failed
FAIL_FAST_FRACTION = 0.95
#: identical error lines (kind + detail with numbers masked) written to requests.jsonl
ERROR_LINES_PER_REASON = 200
#: our own cuts are not the server's failures
NOT_THE_SERVERS = ("cut",)

_NUMBERS = re.compile(r"\d+")


def reason_key(rec: RequestRecord) -> tuple[str, str]:
    """One failure reason: the kind and its detail with numbers masked (token counts vary)."""
    return rec.error_kind or "", _NUMBERS.sub("N", rec.error_detail or "")[:160]


class FailureWatch:
    def __init__(
        self,
        streak: int = FAIL_FAST_STREAK,
        fraction: float = FAIL_FAST_FRACTION,
        lines_per_reason: int = ERROR_LINES_PER_REASON,
    ) -> None:
        self.streak_needed = streak
        self.fraction = fraction
        self.lines_per_reason = lines_per_reason
        self.finished = 0
        self.failed = 0
        self.streak = 0
        self._streak_key: tuple[str, str] | None = None
        self._lines: dict[tuple[str, str], int] = {}
        self.suppressed: dict[str, int] = {}  # error kind -> lines not written (counted in the metrics)
        self.abort_reason: str | None = None

    def observe(self, rec: RequestRecord) -> str | None:
        """Count one finished request (warmup too); returns the reason to stop, once."""
        if rec.error_kind in NOT_THE_SERVERS:
            return None
        self.finished += 1
        if rec.ok:
            self.streak, self._streak_key = 0, None
            return None
        self.failed += 1
        key = reason_key(rec)
        if key == self._streak_key:
            self.streak += 1
        else:
            self._streak_key, self.streak = key, 1
        if (
            self.abort_reason is None
            and self.streak >= self.streak_needed
            and self.failed >= self.fraction * self.finished
        ):
            detail = (rec.error_detail or "").strip()[:200]
            self.abort_reason = (
                f"stopped early: the last {self.streak} requests all failed the same way "
                f"({rec.error_kind}{': ' + detail if detail else ''})"
            )
            return self.abort_reason
        return None

    def keep_line(self, rec: RequestRecord) -> bool:
        """Whether this measured request's line goes to requests.jsonl (repeats beyond the cap do not)."""
        if rec.ok:
            return True
        key = reason_key(rec)
        n = self._lines.get(key, 0) + 1
        self._lines[key] = n
        if n <= self.lines_per_reason:
            return True
        kind = rec.error_kind or "unknown"
        self.suppressed[kind] = self.suppressed.get(kind, 0) + 1
        return False
