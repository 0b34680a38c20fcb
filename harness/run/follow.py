"""Following the load processes: their JSON lines drive the progress display and the window.

Every run mode's load processes print the same lines on stdout (harness.load.main): window_start,
window_end, drained, abort, progress. The follower tells the run driver (harness.run.driver) when
the measured window opens and when the last in-flight request has drained, feeds the progress display, asks
the early-stop watcher, and stops the load when the engine it watches dies (the embedded simulator,
or the engine a sweep started: requests sent to a dead port only add connection errors).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from harness.results.console import Progress


def signal_group(proc: subprocess.Popen[str], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def tail(path: Path, n: int = 8) -> list[str]:
    try:
        return [line.rstrip() for line in path.read_text(errors="replace").splitlines()[-n:]]
    except OSError:
        return []


class WatchedEngine(Protocol):
    """An engine process the run watches (harness.run.target.EmbeddedSim, a sweep's
    harness.sweep.launcher.EngineProcess): `proc` is None before it started."""

    proc: subprocess.Popen[bytes] | None
    log_path: Path
    #: how messages name it ("the simulated engine", "the engine")
    label: str


class WindowMarks(Protocol):
    """Who hears the window's marks (harness.run.driver.RunDriver)."""

    def window_start(self) -> None: ...

    def window_end(self) -> None: ...


class Follower:
    """Reads the load processes' JSON lines; tells `marks` when the window starts and ends."""

    def __init__(
        self,
        procs: list[subprocess.Popen[str]],
        progress: Progress,
        marks: WindowMarks | None,
        watch: Callable[[list[dict[str, Any]]], str | None] | None = None,
        engine: WatchedEngine | None = None,
    ) -> None:
        self.procs = procs
        self.watch = watch
        self.stopped_early: str | None = None
        self.engine = engine  # its death mid-run stops the load and fails the run
        self.engine_exit: tuple[int, float] | None = None  # (exit code, unix time first seen)
        self.talked: set[int] = set()  # load processes that printed a line (signal handlers installed)
        self.stopped: set[int] = set()
        self.progress = progress
        self.marks = marks
        self.started = 0
        self.ended = 0
        self.drained = 0
        self.interrupted = False
        self.latest: dict[int, dict[str, Any]] = {}
        self.write_error: str | None = None  # a load process could not write its files (a full disk)
        self.inline_results: list[dict[str, Any]] = []  # results sent on stdout when the file could not be written
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._read, args=(i, p), daemon=True) for i, p in enumerate(procs)]
        for t in self._threads:
            t.start()

    def _read(self, worker: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            event = line.get("event")
            self.talked.add(worker)
            with self._lock:
                if event == "window_start":
                    self.started += 1
                    if self.started == 1 and self.marks is not None:
                        self.marks.window_start()
                elif event == "window_end":
                    self.ended += 1
                elif event == "drained":
                    pass
                elif event == "worker_lost":  # a distributed worker stopped answering mid-run
                    self.progress.note(
                        f"worker {line.get('worker')} lost ({line.get('reason')}); its "
                        f"{line.get('requests', 0)} reported requests are kept"
                    )
                elif event == "abort":
                    self.progress.note(str(line.get("reason", "stopped early")))
                    if line.get("kind") == "write_error" and self.write_error is None:
                        self.write_error = str(line.get("reason"))
                elif event == "result" and isinstance(line.get("inline"), dict):
                    self.inline_results.append(line["inline"])
                elif event == "progress":
                    self.latest[worker] = line
                    self.progress.update(list(self.latest.values()))
                    if self.watch is not None and self.stopped_early is None:
                        self._check(list(self.latest.values()))
            if event == "drained" and self._all_drained() and self.marks is not None:
                self.marks.window_end()

    def _check(self, lines: list[dict[str, Any]]) -> None:
        """Ask the watcher; on a reason, stop the load like SIGTERM does (in-flight requests drain)."""
        try:
            reason = self.watch(lines) if self.watch is not None else None
        except Exception as exc:  # a watcher bug must not lose the run
            reason, self.watch = None, None
            self.progress.note(f"warning: early-stop watcher failed ({exc}); the run continues")
        if reason:
            self.stopped_early = reason
            self.progress.note(f"stopping early: {reason}")
            for p in self.procs:
                signal_group(p, signal.SIGTERM)

    def _watch_engine(self) -> None:
        engine = self.engine
        proc = engine.proc if engine is not None else None
        if engine is None or proc is None:
            return
        if self.engine_exit is None:
            if proc.poll() is None:
                return
            self.engine_exit = (proc.returncode, time.time())
            self.progress.note(
                f"{engine.label} exited (code {proc.returncode}): stopping the load, "
                f"keeping what was measured; see {engine.log_path}"
            )
        # stop each load process once it has said something (its SIGTERM handler is installed by
        # then; a SIGTERM during its start-up would kill it before it could write anything)
        for i, p in enumerate(self.procs):
            if i in self.talked and i not in self.stopped:
                self.stopped.add(i)
                signal_group(p, signal.SIGTERM)

    def _all_drained(self) -> bool:
        with self._lock:
            self.drained += 1
            return self.drained == len(self.procs)

    def wait(self, grace_s: float | None = None) -> None:
        deadline = None if grace_s is None else time.monotonic() + grace_s
        try:
            for p in self.procs:
                while p.poll() is None:
                    if deadline is not None and time.monotonic() > deadline:
                        signal_group(p, signal.SIGKILL)
                    self._watch_engine()
                    time.sleep(0.1)
            for t in self._threads:
                t.join(timeout=2)
        except KeyboardInterrupt:
            self.interrupted = True
            raise
