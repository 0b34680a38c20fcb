"""Closed-loop back-off: when, how long, and Retry-After (audit Low 13: no back-off, 16-25k requests in 3 s)."""

from __future__ import annotations

import random
from email.utils import formatdate

import pytest

from harness.load import backoff


@pytest.mark.parametrize(
    "status, kind, expected",
    [
        (429, "http_429", True),
        (500, "http_5xx", True),
        (503, "http_5xx", True),
        (None, "connect", True),
        (None, "connect_timeout", True),
        (400, "http_4xx", False),
        (200, None, False),
        (200, "malformed", False),
        (None, "timeout", False),
    ],
)
def test_which_failures_back_off(status: int | None, kind: str | None, expected: bool) -> None:
    assert backoff.should_back_off(status, kind) is expected


def test_delay_doubles_with_jitter_up_to_the_cap() -> None:
    rng = random.Random(1)
    for n in range(1, 12):
        ceiling = min(backoff.CAP_S, backoff.BASE_S * 2 ** (n - 1))
        d = backoff.delay_s(n, rng=rng)
        assert ceiling / 2 <= d <= ceiling
    assert backoff.delay_s(30, rng=rng) <= backoff.CAP_S


def test_retry_after_seconds_and_http_date_are_honoured() -> None:
    assert backoff.delay_s(1, "1") == 1.0
    assert backoff.delay_s(1, "0.25") == 0.25
    assert backoff.delay_s(1, "3600") == backoff.RETRY_AFTER_CAP_S
    assert backoff.retry_after_s(formatdate(1_000_010, usegmt=True), now=1_000_000) == pytest.approx(10)
    assert backoff.retry_after_s(formatdate(999_000, usegmt=True), now=1_000_000) == 0.0
    for junk in ("", None, "soon", "nan"):
        assert backoff.retry_after_s(junk) is None
