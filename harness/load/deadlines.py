"""How long a run may take past its window, and how long one request may take by default.

Why: a stalled or never-ending stream must not hold a 3-s run for the 600-s request timeout.
The window closes on time (the load process ticks it, even when every user is inside a
request), in-flight requests get a drain deadline after it and are then cut and counted
(error kind `cut`), and without an explicit `target.timeout_s` one request may last about as
long as the run it belongs to. Runs bounded only by a request count keep the long default.
"""

from __future__ import annotations

from harness.scenario.models import Scenario

#: request timeout without target.timeout_s when the run has no duration (requests only)
DEFAULT_REQUEST_TIMEOUT_S = 600.0
MIN_REQUEST_TIMEOUT_S = 30.0
MIN_DRAIN_S = 10.0


def drain_s(scenario: Scenario, stop_grace_s: float) -> float:
    """Seconds in-flight requests may finish after the window ends before they are cut.
    Offline: every request is handed out at once, so the whole run is the drain; only the
    request timeout bounds it."""
    if scenario.load.offline:
        return max(stop_grace_s, request_timeout_s(scenario))
    duration = scenario.load.duration_s
    if duration is None:
        return stop_grace_s
    return min(stop_grace_s, max(MIN_DRAIN_S, 2.0 * duration))


def request_timeout_s(scenario: Scenario) -> float:
    """target.timeout_s when given; otherwise scaled to the run (3x warmup + window, 30-600 s)."""
    if scenario.target.timeout_s is not None:
        return scenario.target.timeout_s
    duration = scenario.load.duration_s
    if duration is None:
        return DEFAULT_REQUEST_TIMEOUT_S
    scale = 3.0 * (duration + scenario.warmup.duration_s)
    return min(DEFAULT_REQUEST_TIMEOUT_S, max(MIN_REQUEST_TIMEOUT_S, scale))
