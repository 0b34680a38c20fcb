"""Distributed load over Locust's master/worker messaging, with lossless HDR merging.

Each worker runs its own LoadController on its disjoint share of the deterministic request
stream (worker=k of workers=N: request index % N == k; open-loop arrivals split the same way, so
the union is the requested arrival process). Workers record their own HDR histograms and send
them to the master, encoded, on Locust's messaging (typed messages: harness.load.messages).

The master appends the request lines to one requests.jsonl and writes each worker's final result
as load_result.wK.json: the run directory of a multi-process run, merged by
harness.results.build exactly as for `harness run --processes N`.

The headless-master trap (LOCUST.md §3): `MasterRunner.quit()` waits only 0.5 s for the workers'
last reports. Nothing here relies on it: the master sends harness_stop, waits until every
worker's harness_final has arrived (a timeout is reported, never silent), and only then quits.

Entry points (load processes; they import Locust and so gevent's monkey-patching):

    python -m harness.load.distributed master PLAN.json --expect-workers N [--bind-host H] [--port P]
    python -m harness.load.distributed worker [--master-host H] [--master-port P]

The master prints JSON lines on stdout like `harness.load.main` does (window_start, progress,
window_end, drained, result), so `harness run --distributed N` follows it like one load process.
"""

from __future__ import annotations

from harness.load import gevent_patch  # noqa: F401 - gevent's patching first (its entry points read once)

# isort: split
from harness.load import lazy_web  # noqa: F401 - before Locust: its web UI module on first use

# isort: split
import argparse
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import locust
from locust.env import Environment
from locust.log import setup_logging
from locust.runners import WorkerRunner

from harness.client import http_stream
from harness.client.http_stream import use_reader
from harness.load import user as user_module
from harness.load.collector import Collector
from harness.load.controller import DONE, LoadController
from harness.load.gc_policy import GCPolicy
from harness.load.messages import Delta, Final, Plan, Ready, Stage, Stop
from harness.load.plan import LoadPlan
from harness.metrics.exporter import ENV_DIR, LiveCounts, MasterMetrics
from harness.metrics.record import RequestRecord
from harness.metrics.recorder import MetricSet
from harness.scenario.models import Scenario
from harness.signals import ParentWatch

log = logging.getLogger("harness.distributed")


DEFAULT_MASTER_PORT = 5557


# ====================================================================== worker side
class _Outbox:
    """Stands in for the controller's requests.jsonl on a worker: the lines travel to the master."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> int:
        self.lines.append(text)
        return len(text)

    def take(self) -> str:
        out = "".join(self.lines)
        self.lines = []
        return out

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class _WorkerRun:
    def __init__(self, run_id: str, ctrl: LoadController, tmp: Path) -> None:
        self.run_id = run_id
        self.ctrl = ctrl
        self.tmp = tmp
        self.outbox = _Outbox()
        self.interval = MetricSet(ctrl.metrics.slos)
        self.events: list[dict[str, Any]] = []
        self.started = False
        self.finishing = False
        self.finished = gevent.event.Event()
        self.gc: GCPolicy | None = None
        self.sender: gevent.Greenlet | None = None
        self.wake = gevent.event.Event()
        self.progress: dict[str, Any] = {}
        self.progress_at = 0.0
        self.live: LiveCounts | None = None  # plan.live_metrics: Prometheus counts for the master
        self.load: user_module.LoadRun | None = None  # what this process's users work on (on the Environment)


class WorkerAgent:
    """The worker half: runs the share a master hands out and reports it.

    Also serves a LocalRunner (web UI without workers): Locust then delivers messages by direct
    calls, and the same code measures in-process.
    """

    def __init__(self, environment: Environment, interval_s: float = 1.0) -> None:
        self.env = environment
        self.interval_s = interval_s
        self.run: _WorkerRun | None = None
        self._locust_report = user_module.locust_reporter(environment)
        runner = environment.runner
        if runner is None:
            raise RuntimeError("the worker agent needs Locust's runner: create it before the agent")
        self.runner = runner
        runner.register_message(Plan.TYPE, self._on_plan)
        runner.register_message(Stop.TYPE, self._on_stop, concurrent=True)
        runner.register_message(Stage.TYPE, self._on_stage)
        environment.events.test_start.add_listener(self._on_test_start)
        environment.events.test_stopping.add_listener(self._on_test_stopping)
        environment.events.quitting.add_listener(self._on_test_stopping)

    @property
    def worker_label(self) -> str:
        return f"worker {self.run.ctrl.plan.worker}" if self.run else "worker"

    # ---------------------------------------------------------------- messages
    def _on_plan(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        old = self.run
        if old is not None and not old.finished.is_set():
            log.warning("a new run started before the previous one reported; dropping the previous one")
            self._abandon(old)
        m = Plan.of(msg.data)
        tmp = Path(tempfile.mkdtemp(prefix="harness-worker-"))
        plan = LoadPlan.model_validate({**m.plan, "out_dir": str(tmp)})
        try:
            use_reader(None if plan.reader == "auto" else plan.reader)
        except ValueError as exc:  # this host cannot run the reader asked for: say so, read on
            log.error("%s; this worker reads with its %s reader (summary.json client.reader)", exc, http_stream.READER)
        ctrl = LoadController(plan, emit=self._emit)
        run = _WorkerRun(m.run, ctrl, tmp)
        ctrl.requests_file.close()
        ctrl.requests_file = run.outbox

        def on_done() -> None:
            gevent.spawn(self._finish, "done")

        ctrl.on_done = on_done
        if plan.live_metrics:
            run.live = LiveCounts(ctrl)
            runner = self.runner
            run.live.users = lambda: runner.user_count
        # export=False: whatever this host's environment says, the master exports our counts once
        run.load = user_module.install(self.env, ctrl, self._report, export=False)
        self.run = run
        if self._test_running():
            self._start()  # LocalRunner: the plan arrives from inside test_start

    def _on_stop(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        run = self.run
        if run is not None and Stop.of(msg.data).run == run.run_id:
            self._finish("stopped")

    def _on_stage(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        run, m = self.run, Stage.of(msg.data)
        if run is not None and m.run == run.run_id:
            run.ctrl.stage = m.stage

    def _on_test_start(self, **_kw: Any) -> None:
        if self.run is not None and not self.run.started:
            self._start()
        elif isinstance(self.env.runner, WorkerRunner) and (self.run is None or self.run.finishing):
            # shares are fixed when a test starts; Locust may still send users to a late worker
            log.warning(
                "this worker joined after the test started: it has no share of the request stream and "
                "stays idle until the next test"
            )

    def _on_test_stopping(self, **_kw: Any) -> None:
        # Locust is about to stop the users (stop_timeout 0 would cut streams): finish first
        if self.run is not None and self.run.started:
            self._finish("stopped")

    def _test_running(self) -> bool:
        state = getattr(self.env.runner, "state", None)
        return state in ("spawning", "running") or not isinstance(self.env.runner, WorkerRunner)

    # ---------------------------------------------------------------- run lifecycle
    def _start(self) -> None:
        run = self.run
        assert run is not None
        run.started = True
        if run.ctrl.plan.gc_tune:
            run.gc = GCPolicy().start()
        run.ctrl.start()
        run.sender = gevent.spawn(self._sender, run)

    def _emit(self, line: dict[str, Any]) -> None:
        if line.get("event") == "window_start":
            # Locust's own stats (RPS, Aggregated, CSV) count from the window, not the warmup
            self.env.stats.reset_all()
        run = self.run
        if run is not None:
            run.events.append(line)
            run.wake.set()  # window marks go out at once (telemetry baselines hang on them)

    def _report(self, rec: RequestRecord) -> None:
        self._locust_report(rec)
        run = self.run
        if run is not None:
            if run.live is not None:
                run.live.observe(rec)
            if not rec.warmup:
                run.interval.record(rec)

    def _sender(self, run: _WorkerRun) -> None:
        while not run.finishing:
            run.wake.wait(self.interval_s)
            run.wake.clear()
            if run.finishing:
                break
            self._send_delta(run)

    def _send_delta(self, run: _WorkerRun) -> None:
        interval, run.interval = run.interval, MetricSet(run.ctrl.metrics.slos)
        events, run.events = run.events, []
        now = time.monotonic()
        if now - run.progress_at >= 0.9 * self.interval_s:
            # progress() also samples the process's CPU share over the time since its last call:
            # only on the regular beat (a wake-up for a window mark would sample a few ms)
            run.progress, run.progress_at = run.ctrl.progress(), now
        self._send(
            Delta(
                run=run.run_id,
                worker=run.ctrl.plan.worker,
                t=time.time(),
                progress={
                    **run.progress,
                    "phase": run.ctrl.shown_phase(),
                    "sent": run.ctrl.sent - run.ctrl.scheduled,
                    "done": run.ctrl.tally.done,
                    "failed": run.ctrl.tally.failed,
                    "in_flight": run.ctrl.in_flight_sent,
                    "output_tokens": run.ctrl.tally.output_tokens,
                },
                events=events,
                metrics=interval.to_dict(with_all=False),  # classes, groupings (per turn, ...), sessions
                requests=run.outbox.take(),
                live=run.live.take() if run.live is not None else {},
            )
        )

    def _send(self, msg: Delta | Final) -> None:
        try:
            self.runner.send_message(msg.TYPE, msg.wire())
        except Exception:  # a lost connection is reported by the master's timeout
            log.exception("%s: could not send %s to the master", self.worker_label, msg.TYPE)

    def _finish(self, reason: str) -> None:
        """Stop handing out work, let in-flight requests finish (up to the plan's grace), then
        send the last delta and the complete result. Idempotent; concurrent callers wait."""
        run = self.run
        if run is None:
            return
        if run.finishing:
            run.finished.wait()
            return
        run.finishing = True
        ctrl = run.ctrl
        try:
            ctrl.stop()
            deadline = time.monotonic() + ctrl.plan.stop_grace_s
            while ctrl.phase != DONE and time.monotonic() < deadline:
                gevent.sleep(0.02)
            if run.load is not None:
                run.load.finisher.drain()  # finished but not yet recorded
            ctrl.cut_at_end = ctrl.in_flight
            if run.sender is not None:
                run.sender.kill(block=True)
            self._send_delta(run)
            if isinstance(self.env.runner, WorkerRunner):
                # Locust's own stats of the last requests go to the master before our final result
                # (else they waited for its 3-s report beat, and the master's Aggregated row and
                # CSV could be written without them); one connection, so they arrive first
                self.env.runner._send_stats()
            result = ctrl.result()
            if run.gc is not None:
                run.gc.stop()
                result["timing"]["gc"] = run.gc.summary()
            self._send(Final(run=run.run_id, worker=ctrl.plan.worker, result=result, reason=reason))
        finally:
            ctrl.close()
            shutil.rmtree(run.tmp, ignore_errors=True)
            run.finished.set()

    def _abandon(self, run: _WorkerRun) -> None:
        run.finishing = True
        if run.sender is not None:
            run.sender.kill(block=False)
        if run.gc is not None:
            run.gc.stop()
        run.ctrl.stop()
        run.ctrl.close()
        shutil.rmtree(run.tmp, ignore_errors=True)
        run.finished.set()


def _emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def run_master(plan: LoadPlan, expect_workers: int, bind_host: str, port: int, connect_timeout_s: float = 60.0) -> int:
    """The headless master of `harness run --distributed N`: returns the exit code (0, or 3 when
    a worker's final result is missing)."""
    setup_logging("WARNING")
    env = Environment(user_classes=[user_module.LLMUser], events=locust.events)
    runner = env.create_master_runner(master_bind_host=bind_host, master_bind_port=port)
    # registered before any worker can connect: a worker is counted once its agent listens
    # (Locust's client_ready comes before the worker's handlers exist, and on a loaded box the
    # plan then reached a worker first and was dropped: that run waited for it forever)
    agents: set[str] = set()
    runner.register_message(Ready.TYPE, lambda environment, msg, **_kw: agents.add(str(msg.node_id)))
    run_dir = Path(plan.out_dir)
    ended: set[int] = set()

    def on_event(name: str, line: dict[str, Any]) -> None:
        if name == "window_start":
            _emit({"event": "window_start", "t": line.get("t", time.time())})
        elif name in ("worker_window_end", "worker_lost"):
            first = len(ended) < collector.n
            ended.add(line["worker"])
            if first and len(ended) == collector.n:
                _emit({"event": "window_end", "t": line.get("t", time.time())})
            if name == "worker_lost":
                _emit(
                    {
                        "event": "worker_lost",
                        "worker": line["worker"],
                        "reason": line["reason"],
                        "requests": line.get("requests", 0),
                    }
                )
        elif name == "drained":
            _emit({"event": "drained", "t": line.get("t", time.time())})

    # live metrics (the runner set PROMETHEUS_MULTIPROC_DIR for this process): the workers ship their
    # counts in their deltas and this process writes them to the run's directory, once
    sink = MasterMetrics() if plan.live_metrics and os.environ.get(ENV_DIR) else None

    def on_delta(k: int, delta: Delta) -> None:
        if sink is not None and delta.live:
            sink.add(k, delta.live)

    def on_event_live(name: str, line: dict[str, Any]) -> None:
        if name == "final" and sink is not None:
            sink.worker_done(line["worker"])
        on_event(name, line)

    collector = Collector(env, on_event=on_event_live, on_delta=on_delta)
    env.events.test_start.add_listener(lambda **_kw: collector.begin(plan, run_dir))
    stopping = gevent.event.Event()
    parent = ParentWatch()

    def _stop(*_args: object) -> None:
        if parent.orphaned:  # harness run was killed outright: nobody reads what a drain would write
            collector.close()
            os._exit(1)
        stopping.set()

    gevent.signal_handler(signal.SIGTERM, _stop)
    gevent.signal_handler(signal.SIGINT, _stop)

    deadline = time.monotonic() + connect_timeout_s

    def listening() -> int:
        return len(agents & {str(c.id) for c in runner.clients.ready})

    while listening() < expect_workers:
        if time.monotonic() > deadline or stopping.is_set():
            print(
                f"error: only {listening()} of {expect_workers} workers connected within {connect_timeout_s:.0f} s",
                file=sys.stderr,
            )
            runner.quit()
            return 2
        gevent.sleep(0.1)
    load = Scenario.model_validate(plan.scenario).load  # the whole load: Locust shares the users out
    gevent.spawn(runner.start, load.users, load.spawn_rate())

    def _progress() -> None:
        while True:
            gevent.sleep(plan.progress_interval_s)
            if collector.progress:
                _emit({"event": "progress", **collector.totals()})

    progress = gevent.spawn(_progress)
    while not collector.all_final.is_set() and not stopping.is_set():
        gevent.sleep(0.1)
    if not collector.all_final.is_set():
        collector.stop_workers()
    missing = collector.wait_finals(collector.final_timeout_s())
    progress.kill(block=False)
    if collector.progress:
        _emit({"event": "progress", **collector.totals()})
    if missing:
        _emit({"event": "missing_workers", "workers": missing})
    collector.close()
    runner.quit()  # every final result is in (or reported missing): the 0.5 s wait costs nothing
    _emit({"event": "result", "paths": sorted(str(p) for p in run_dir.glob("load_result*.json"))})
    return 3 if missing else 0


def run_worker(master_host: str, master_port: int) -> int:
    setup_logging("WARNING")
    env = Environment(user_classes=[user_module.LLMUser], events=locust.events)
    try:
        runner = env.create_worker_runner(master_host, master_port)
    except (OSError, ConnectionError) as exc:
        print(f"error: cannot connect to the master at {master_host}:{master_port} ({exc})", file=sys.stderr)
        return 2
    WorkerAgent(env)
    runner.send_message(Ready.TYPE, Ready(run="").wire())  # the master hands out work from now on
    gevent.signal_handler(signal.SIGTERM, runner.quit)
    runner.greenlet.join()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.load.distributed")
    sub = p.add_subparsers(dest="role", required=True)
    m = sub.add_parser("master", help="headless master for one load plan")
    m.add_argument("plan", type=Path)
    m.add_argument("--expect-workers", type=int, required=True)
    m.add_argument("--bind-host", default="127.0.0.1")
    m.add_argument("--port", type=int, default=DEFAULT_MASTER_PORT)
    m.add_argument("--connect-timeout", type=float, default=60.0)
    w = sub.add_parser("worker", help="a worker for a harness master (harness run --distributed, harness ui)")
    w.add_argument("--master-host", default="127.0.0.1")
    w.add_argument("--master-port", type=int, default=DEFAULT_MASTER_PORT)
    args = p.parse_args(argv)
    if args.role == "master":
        plan = LoadPlan.read(args.plan)  # credential headers: from the environment
        return run_master(plan, args.expect_workers, args.bind_host, args.port, args.connect_timeout)
    return run_worker(args.master_host, args.master_port)


if __name__ == "__main__":
    sys.exit(main())
