"""A headless load process: `python -m harness.load.main PLAN.json`.

Runs Locust programmatically with the harness user, prints JSON lines on stdout for the
orchestrator (progress every second, and window_start / window_end / drained events), and
writes `load_result[.wN].json` at the end. SIGTERM/SIGINT stop the hand-out of new requests,
let in-flight ones finish (up to the plan's grace), and still write every result; when the
orchestrator itself is gone (killed outright), it stops at once instead (signals.ParentWatch).
"""

from __future__ import annotations

from harness.load import gevent_patch  # noqa: F401 - gevent's patching first (its entry points read once)

# isort: split
from harness.load import lazy_web  # noqa: F401 - before Locust: its web UI module on first use

# isort: split
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import gevent  # Locust patches on import; this process is a load process
import gevent.event
import locust
from locust.env import Environment
from locust.log import setup_logging

from harness.client.http_stream import perf_ns, use_reader, warm_kernel_timestamps
from harness.errors import UserError
from harness.load import user as user_module
from harness.load.controller import DONE, DRAIN, LoadController
from harness.load.deadlines import drain_s
from harness.load.gc_policy import GCPolicy
from harness.load.limits import raise_fd_limit
from harness.load.plan import LoadPlan
from harness.signals import ParentWatch


def _emit(line: dict) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _abandon(ctrl: LoadController) -> None:
    """The orchestrator died (kill -9): keep the lines recorded so far (complete lines only: each
    is one write) and exit without draining, so nothing more lands in the dead run's files."""
    for f in (ctrl.requests_file, ctrl.progress_file):
        with contextlib.suppress(OSError, ValueError):
            f.flush()
    os._exit(1)


def run(plan: LoadPlan) -> dict:
    parent = ParentWatch()
    setup_logging("WARNING")
    try:
        use_reader(None if plan.reader == "auto" else plan.reader)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    users, spawn_rate = plan.users()
    fd_note = raise_fd_limit(users + 64)
    if plan.kernel_stamps:
        warm_kernel_timestamps()  # before any request: see http_stream.warm_kernel_timestamps
    ctrl = LoadController(plan, emit=_emit)
    env = Environment(user_classes=[user_module.LLMUser], events=locust.events)
    load_run = user_module.install(env, ctrl, user_module.locust_reporter(env))
    finished = gevent.event.Event()
    ctrl.on_done = finished.set
    runner = env.create_local_runner()

    def _stop(*_args: object) -> None:
        if parent.orphaned:
            _abandon(ctrl)  # the parent-death signal: the orchestrator is gone, stop now
        load_run.stop()

    gevent.signal_handler(signal.SIGTERM, _stop)
    gevent.signal_handler(signal.SIGINT, _stop)

    def _progress() -> None:
        while not finished.is_set():
            if parent.orphaned:
                _abandon(ctrl)  # no parent-death signal came (its thread ended first), the watch saw it
            _emit({"event": "progress", **ctrl.progress()})
            gevent.sleep(plan.progress_interval_s)

    gc_policy = GCPolicy().start() if plan.gc_tune else None

    ctrl.start()
    runner.start(users, spawn_rate=spawn_rate, wait=False)
    progress = gevent.spawn(_progress)
    # wait for the window to end (closed on time by tick(), even when every user is stuck inside
    # a request), then for in-flight requests up to the drain deadline; then cut and count them
    while ctrl.phase not in (DRAIN, DONE):
        finished.wait(0.2)
        ctrl.tick()
    # open loop hands requests out ahead of their send times: the drain counts from the window's end
    while ctrl.window_end_ns is not None and perf_ns() < ctrl.window_end_ns and not finished.is_set():
        finished.wait(0.2)
    drain = drain_s(ctrl.scenario, plan.stop_grace_s)
    finished.wait(drain)
    if not finished.is_set() and load_run.cut_in_flight(
        f"still in flight {drain:g} s after the window ended (drain deadline)"
    ):
        finished.wait(5.0)  # the cut requests reach the Finisher and are recorded
    runner.stop()
    load_run.finisher.drain()  # requests that finished but were not yet recorded
    ctrl.cut_at_end = ctrl.in_flight
    runner.quit()
    finished.set()
    progress.kill(block=False)
    _emit({"event": "progress", **ctrl.progress()})
    result = ctrl.result()
    if fd_note:
        result.setdefault("warnings", []).append(fd_note)
    if gc_policy is not None:
        gc_policy.stop()
        result["timing"]["gc"] = gc_policy.summary()
    ctrl.close()
    ctrl.check_files()  # the last flush failed (a full disk): said as well
    suffix = f".w{plan.worker}" if plan.workers > 1 else ""
    path = Path(plan.out_dir) / f"load_result{suffix}.json"
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(result))
        os.replace(tmp, path)
    except OSError as exc:
        # a full disk: the orchestrator gets the result on stdout (a pipe) instead of a file
        tmp.unlink(missing_ok=True)
        _emit({"event": "result", "path": None, "inline": result, "error": f"{path.name}: {exc.strerror or exc}"})
        return result
    _emit({"event": "result", "path": str(path)})
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.load.main PLAN.json", file=sys.stderr)
        return 2
    try:
        plan = LoadPlan.read(Path(argv[0]))  # credential headers: from the environment
        run(plan)
    except UserError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
