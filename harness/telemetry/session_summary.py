"""The `engine` block a TelemetrySession ends with: its window's values, or why there are none.

Apart from harness.telemetry.session because it is the session's summary, not its scraping: it
reads the session's state once, after the threads are done (under the session's lock), and says
which part of the window the values cover when scrapes failed (a final scrape that recovered,
periodic scrapes turned off, a failed final scrape).
"""

from __future__ import annotations

from typing import Any

from harness.telemetry.block import build_block, empty_block


def session_block(session: Any) -> dict:
    profile_name = session._profile.name if session._profile else None
    if session._src is not None and not session._src.live_window:
        last = session._last_exc
        # live polling may have given up (no data yet, a bad selector): the window query is
        # still worth one attempt, unless the server was unreachable or refused us for good
        if not (session._disabled and last is not None and (last.unreachable or last.permanent)):
            return session._src.window_block(session)
    acc = session._acc
    if session.source == "none" or acc is None or acc.scrapes < 2:
        reason = session._missing_reason
        if reason is None:
            reason = (
                "mark_window_start was never called"
                if session._t0 is None
                else "fewer than 2 successful scrapes in the measured window"
            )
        return empty_block(
            source=session.source,
            missing_reason=reason,
            profile=profile_name,
            expected_hit_rate=session.expected_hit_rate,
            gpu_memory=session._gpu_block(),
            scrapes=acc.scrapes if acc else 0,
            extra_telemetry=session._telemetry_extra() if session.source != "none" else None,
        )
    reason = None
    if session._final_recovered:
        reason = (
            f"gauges sampled only until periodic scrapes stopped ({session._missing_reason}); "
            "counters span the whole window (baseline and final scrape succeeded)"
        )
    elif session._disabled:
        reason = f"partial window: {session._missing_reason}"
    elif session._consecutive_failures and session._phase == "post":
        reason = f"final scrape failed ({session._missing_reason}); window ends at the last good scrape"
    return build_block(
        acc,
        window_s=session._window_s(),
        source=session.source,
        scrapes=acc.scrapes,
        missing_reason=reason,
        expected_hit_rate=session.expected_hit_rate,
        gpu_memory=session._gpu_block(acc),
        extra_telemetry=session._telemetry_extra(),
    )
