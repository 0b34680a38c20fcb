"""Stopping signals and child processes that must not outlive the harness.

Why: SIGTERM and SIGHUP (a closed terminal, a job scheduler) must stop a run as Ctrl-C does,
keeping what was measured, and be recorded as what they were ("terminated (SIGTERM)"), not as
a Ctrl-C. And a `harness run` or `harness sweep` killed outright (SIGKILL) must not leave the
simulated engine or the load processes running: every child gets a parent-death signal.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable


class Terminated(KeyboardInterrupt):
    """A stop by SIGTERM/SIGHUP: handled like Ctrl-C, recorded under its own name."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


def stop_reason(exc: BaseException) -> str:
    """What stopped the run, for summaries and sweep indexes."""
    if isinstance(exc, Terminated):
        return f"terminated ({exc.name})"
    return "interrupted (Ctrl-C)"


def raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def stop_on_term_and_hup() -> None:
    """SIGTERM and SIGHUP stop like Ctrl-C (the data is kept), under their own names."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread, or a platform without SIGHUP
            signal.signal(sig, raise_terminated)


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, resolved in the parent (the child between fork and exec must not import)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:  # not Linux: no parent-death signal
        return None


_PRCTL = _prctl() if os.name == "posix" else None
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child before exec (Popen's preexec_fn): SIGTERM this process when its parent dies,
    even by SIGKILL, so no engine or load process is orphaned. Linux only; elsewhere a no-op.
    The signal follows the parent *thread* that started the child: start children from the
    thread that lives as long as the run (the main thread)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class ParentWatch:
    """Whether the process that started this one is gone (a child's parent-pid changes when its
    parent dies: it is re-parented to init or a subreaper).

    Why: the parent-death signal is SIGTERM, which a load process takes as "stop gracefully": it
    then drained its in-flight requests for up to the grace (40 s) and appended their lines to the
    files of a run whose `harness run` had been killed with SIGKILL (audit R7). A process that
    finds its parent gone stops at once instead; nobody will read what it would still write."""

    def __init__(self, parent_pid: int | None = None) -> None:
        # `parent_pid`: the pid the parent gave on the command line. Without it, a parent that died
        # before this line ran would be taken for init, and the orphan would never notice.
        self.parent_pid = os.getppid() if parent_pid is None else parent_pid

    @property
    def orphaned(self) -> bool:
        return os.getppid() != self.parent_pid
