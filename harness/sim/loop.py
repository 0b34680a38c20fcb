"""An asyncio event loop whose timers fire to the microsecond, not the millisecond.

`selectors.EpollSelector` passes its timeout to `epoll_wait`, which counts whole milliseconds
(CPython rounds up), so a timer due in 0.3 ms fires up to 1 ms late. Token schedules are in
milliseconds, so that error would dominate send lateness. Here the wait is done by
`select()` on the epoll descriptor itself (microsecond timeout; an epoll fd is readable when
any registered fd is ready), then a non-blocking `epoll_wait` collects the events. The thread's
timer slack is also lowered from the default 50 us to 1 us where the platform allows.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import select
import selectors
import sys

_PR_SET_TIMERSLACK = 29


class PreciseEpollSelector(selectors.EpollSelector):
    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout > 0:
            ready, _, _ = select.select([self.fileno()], [], [], timeout)
            if not ready:
                return []
            timeout = 0
        return super().select(timeout)


def _lower_timer_slack() -> None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except Exception:  # best effort; only precision suffers
        pass


def new_event_loop() -> asyncio.AbstractEventLoop:
    if sys.platform.startswith("linux") and hasattr(selectors, "EpollSelector"):
        _lower_timer_slack()
        return asyncio.SelectorEventLoop(PreciseEpollSelector())
    return asyncio.new_event_loop()
