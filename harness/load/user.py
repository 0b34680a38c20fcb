"""The Locust user: pulls planned requests from the process's controller and measures them.

Imports Locust (and so gevent's monkey-patching): only load processes import this module.
Each user owns one keep-alive connection. In open loop a user sleeps until the request's
intended send time; if every user is busy the request goes out late and its latency still counts
from the intended time (coordinated omission), with the lateness reported as send lag.

What a load process's users share (its controller, the Finisher, the stop flag, the requests in
flight) is one `LoadRun` hung on Locust's Environment (`install`, `load_of`), not module state:
a process that runs several tests (the web UI, a distributed worker) or several Environments
(tests) keeps each run's users on their own run.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from typing import cast

import gevent
import gevent.event
from locust import User, constant, task
from locust.env import Environment
from locust.exception import StopUser

from harness.client.http_stream import Connection, Endpoint, StreamError, StreamResult, perf_ns
from harness.client.request import finalize, transfer
from harness.load import backoff, live_metrics
from harness.load.controller import Item, LoadController, Pause
from harness.load.failures import reason_key
from harness.load.reactor import ReactorConnection
from harness.metrics.record import RequestRecord

#: where each interpreted record goes besides the record file (Locust's stats, live metrics)
Report = Callable[[RequestRecord], None]
#: sends one turn of a session (the user's own send, with its connection)
Sender = Callable[["LoadRun", Item, "gevent.event.Event | None"], None]


class Finisher:
    """Interprets and records finished requests while the event loop is idle.

    Reads are stamped by the kernel, but a read that comes too late can still hold two events
    that then share one stamp. JSON decoding and histogram recording therefore wait for
    `gevent.idle()`: they never sit between a socket becoming readable and its read.

    A load process at its limit is never idle, and every waiting response holds its whole SSE
    stream (about 25 KB at 100 tokens): the old bound of 4,096 waiting responses was ~100 MB,
    the RSS that "grew" 3x at 512 streams (it filled, then stayed full). So past `SOFT` waiting
    responses one is interpreted per turn of the event loop (the reactor reads a batch in
    between), and past `HARD` they are interpreted back to back: memory is bounded by a few MB,
    whatever the number of requests.
    """

    SOFT = 64
    HARD = 1024

    def __init__(self, ctrl: LoadController, report: Report) -> None:
        self.ctrl = ctrl
        self.report = report
        self.queue: deque[tuple[RequestRecord, StreamResult | None, gevent.event.Event | None]] = deque()
        self.wake = gevent.event.Event()
        self.greenlet = gevent.spawn(self._run)

    def put(self, rec: RequestRecord, res: StreamResult | None, done: gevent.event.Event | None = None) -> None:
        """`done` is set once the record is interpreted (a session's next turn needs the reply)."""
        self.queue.append((rec, res, done))
        self.wake.set()

    def _one(self) -> None:
        rec, res, done = self.queue.popleft()
        try:
            self._interpret(rec, res)
        finally:
            if done is not None:
                done.set()

    def _interpret(self, rec: RequestRecord, res: StreamResult | None) -> None:
        ctrl = self.ctrl
        if res is not None:
            try:
                finalize(rec, res, ctrl.spec, ctrl.count_tokens)
            except Exception as exc:  # a response we cannot read is counted, never a lost run
                rec.error_kind = "malformed"
                rec.error_detail = f"could not interpret the response ({type(exc).__name__}: {str(exc)[:160]})"
        ctrl.finish(rec)
        with contextlib.suppress(Exception):  # Locust's stats / live metrics are secondary to the record
            self.report(rec)

    def _run(self) -> None:
        queue = self.queue
        while True:
            if not queue:
                self.wake.clear()
                self.wake.wait()
                continue
            waiting = len(queue)
            tally = self.ctrl.tally
            if waiting > tally.finish_backlog_max:
                tally.finish_backlog_max = waiting
            if waiting < self.SOFT:
                gevent.idle()
            elif waiting < self.HARD:
                gevent.sleep(0)  # one response per turn of the loop: the reactor reads in between
            if queue:
                self._one()

    def drain(self) -> None:
        while self.queue:
            self._one()


def _prefetcher(ctrl: LoadController, limit: int) -> None:
    """Build upcoming requests while the event loop is idle."""
    while True:
        gevent.idle()
        if ctrl.prefetch(limit) == 0:
            gevent.sleep(0.02)


class LoadRun:
    """One run's share in this process, as its users see it: hung on Locust's Environment.

    `ctrl` hands out the work; `finisher` interprets finished requests; `stopping` is set when
    the run stops before its window ends (SIGTERM, an early stop): open-loop users still waiting
    for a send time give the request back instead of sending it; `in_flight` holds the user
    greenlets inside a request (connect, send, read): what a drain deadline cuts."""

    ATTR = "harness_load"  # the Environment attribute it hangs on

    def __init__(self, ctrl: LoadController, report: Report) -> None:
        self.ctrl = ctrl
        self.stopping = gevent.event.Event()
        self.in_flight: set[gevent.Greenlet] = set()
        self.finisher = Finisher(ctrl, report)
        load = ctrl.scenario.load
        # open loop: every arrival a free user takes when the window opens, built in the warmup
        limit = min(max(load.concurrency or 0, 16), 512) if not ctrl.open_loop else min(max(load.users, 64), 1024)
        self.prefetcher = gevent.spawn(_prefetcher, ctrl, limit)

    def stop(self) -> None:
        """Stop handing out work, and release users waiting for a send time."""
        self.ctrl.stop()
        self.stopping.set()

    def cut_in_flight(self, detail: str) -> int:
        """End every request still in flight with error kind `cut` (the drain deadline passed).

        The request's greenlet gets a StreamError at the point it waits, so `transfer` records it
        like any transport failure and the Finisher counts it; nothing is silently dropped."""
        victims = list(self.in_flight)
        for g in victims:
            g.kill(exception=StreamError("cut", detail), block=False)
        return len(victims)

    def close(self) -> None:
        """The run is over (or replaced): its background greenlets end."""
        self.finisher.greenlet.kill(block=False)
        self.prefetcher.kill(block=False)


def load_of(environment: Environment) -> LoadRun | None:
    """The run this process's users work for, or None (no share of the test)."""
    return getattr(environment, LoadRun.ATTR, None)


def install(
    environment: Environment, controller: LoadController, report: Report | None = None, export: bool = True
) -> LoadRun:
    """Make `controller` the source of work for the LLMUsers of `environment`.

    `export=False`: this process never writes live Prometheus metrics itself (a Locust worker:
    its counts travel to the master in its deltas, which exports them once)."""
    old = load_of(environment)
    if old is not None:  # a previous run on this environment (web UI, distributed worker: one per test)
        old.close()
    # live Prometheus metrics (only when the runner set HARNESS_METRICS_DIR): observed in the Finisher
    report = report or (lambda rec: None)
    run = LoadRun(controller, live_metrics.wrap_report(report, controller) if export else report)
    setattr(environment, LoadRun.ATTR, run)
    return run


#: epoll waits in whole milliseconds, so a plain gevent.sleep wakes up to 1 ms late; the last
#: stretch before an intended send time is spent yielding (other greenlets keep running).
SPIN_NS = 1_200_000
CONNECT_AHEAD_NS = 50_000_000


def _sleep_until(when_ns: int) -> None:
    delay = when_ns - perf_ns()
    if delay > SPIN_NS:
        gevent.sleep((delay - SPIN_NS) / 1e9)
    while perf_ns() < when_ns:
        gevent.sleep(0)


class Streams:
    """One keep-alive connection per endpoint (a fleet has several), opened on first use: a user's,
    or a sub-agent's while it runs (a request holds its connection until its stream ends)."""

    def __init__(self, ctrl: LoadController) -> None:
        self.ctrl = ctrl
        self.conns: dict[int, Connection] = {}

    def conn(self, i: int) -> Connection:
        conn = self.conns.get(i)
        if conn is None:
            ctrl = self.ctrl
            endpoint = Endpoint.parse(ctrl.fleet.endpoints[i])
            # plain HTTP: the process's epoll reactor reads every stream; TLS: a blocking reader each
            conn_cls = Connection if endpoint.tls else ReactorConnection
            conn = self.conns[i] = conn_cls(
                endpoint, timeout_s=ctrl.spec.timeout_s, kernel_stamps=ctrl.plan.kernel_stamps
            )
        return conn

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def send(
    run: LoadRun, item: Item, done: gevent.event.Event | None, streams: Streams
) -> tuple[RequestRecord, StreamResult | None]:
    """Route, wait for the intended send time (open loop), stream and stamp; the record goes to the
    Finisher. Raises StopUser when the run stops before the send time (the item is given back)."""
    ctrl = run.ctrl
    i = ctrl.fleet.route(item)  # the endpoint (a fleet's routing policy; one endpoint: always 0)
    conn = streams.conn(i)
    if item.intended_ns is not None:
        # open the connection shortly before the send time (not all at spawn), so connect
        # time never shows up as send lag
        early = item.intended_ns - perf_ns() - CONNECT_AHEAD_NS
        if early > 0 and run.stopping.wait(early / 1e9):
            ctrl.unsend(item)
            raise StopUser()
        with contextlib.suppress(Exception):  # execute() records connect errors
            conn.connect()
        _sleep_until(item.intended_ns)
    rec = ctrl.new_record(item)
    if isinstance(conn, ReactorConnection):  # the native reader sizes its buffers by it
        conn.expected_events = item.planned.output_tokens + 4  # role, usage, [DONE] and one spare
    me = cast(gevent.Greenlet, gevent.getcurrent())  # a Locust user's task runs in a gevent Greenlet
    run.in_flight.add(me)
    try:
        res = transfer(conn, ctrl.spec, item.payload, rec)
    finally:
        run.in_flight.discard(me)
        ctrl.fleet.release(item)
    run.finisher.put(rec, res, done)
    return rec, res


def run_session(run: LoadRun, item: Item | None, streams: Streams, sender: Sender | None = None) -> None:
    """Hold one conversation to its end: each turn is built once the Finisher has interpreted the
    previous reply (idle time, off the read path); between turns the think time or the tool's
    latency; an agentic step that fans out runs its sub-agents in parallel (each on connections
    of its own, on this load process) and joins them before the parent continues. `sender`: sends
    a turn (the user's `_send`, with its back-off; a sub-agent's: plain `send`)."""
    sessions, agents = run.ctrl.sessions, run.ctrl.agents
    while item is not None:
        done = gevent.event.Event()
        if sender is not None:
            sender(run, item, done)
        else:
            send(run, item, done, streams)
        done.wait()
        subs = agents.fan_out(item)
        if subs:
            gevent.joinall([gevent.spawn(_sub_agent, run, s) for s in subs])
            agents.join(item)
        think = sessions.think_s(item)
        if think is None:
            return
        if item.intended_ns is None and think > 0 and run.stopping.wait(think):
            sessions.next_turn(item)  # past the window now: counted as a cut session
            return
        item = sessions.next_turn(item)


def _sub_agent(run: LoadRun, item: Item) -> None:
    streams = Streams(run.ctrl)
    try:
        run_session(run, item, streams)
    except StopUser:
        pass  # the run stopped before its send time: the item was given back
    finally:
        streams.close()


class LLMUser(User):
    wait_time = constant(0)
    host = "http://127.0.0.1"  # the controller's plan holds the real target

    def on_start(self) -> None:
        run = load_of(self.environment)
        self.load_run = run  # not `run`: that is Locust's User.run, the user's own loop
        if run is None:  # this process has no share of the test (its start failed, or it joined late)
            self.conn = None
            return
        self.streams = Streams(run.ctrl)
        self.conn = self.streams.conn(0)

    def on_stop(self) -> None:
        streams = getattr(self, "streams", None)
        if streams is not None:
            streams.close()

    @task
    def one_request(self) -> None:
        run = self.load_run
        if run is None:
            raise StopUser()
        item = run.ctrl.next_item()
        if item is None:
            raise StopUser()
        if isinstance(item, Pause):  # open-loop warmup still sending: the window is not open yet
            _sleep_until(item.until_ns)
            return
        if item.planned.session is None:
            self._send(run, item, None)
            return
        # a multi-turn session: this user holds the conversation to its end
        run_session(run, item, self.streams, sender=self._send)

    def _send(self, run: LoadRun, item: Item, done: gevent.event.Event | None) -> None:
        rec, res = send(run, item, done, self.streams)
        status = res.status if res is not None else None
        if item.intended_ns is None and backoff.should_back_off(status, rec.error_kind):
            # closed loop against a refusing or failing target: back off (harness.load.backoff)
            # instead of a retry storm of thousands of failed requests a second
            self._failures = getattr(self, "_failures", 0) + 1
            delay = backoff.delay_s(self._failures, res.headers.get("retry-after") if res is not None else None)
            run.ctrl.tally.note_backoff(delay)
            gevent.sleep(delay)
        else:
            self._failures = 0


def locust_reporter(environment: Environment) -> Report:
    """Feed Locust's own stats (UI tables, CSV): one entry per class, one event per request.

    Locust counts every event as a request, so a TTFT event beside the E2E one doubled its RPS
    and charts (audit D13: 18 req/s in Locust's header for 8 real). Its response time is the
    E2E latency; TTFT, ITL and TPOT are in the LLM tab and the run's summary. Warmup requests
    are not reported: Locust's Aggregated row, RPS and CSV count the measured requests only, as
    summary.json does (audit N16: `Aggregated,56` = 52 measured + 4 warmup); the load process
    resets Locust's stats when the window opens, so its RPS counts from there."""
    fire = environment.events.request.fire

    def report(rec: RequestRecord) -> None:
        if rec.warmup:
            return
        if rec.ok:
            fire(
                request_type="LLM",
                name=f"{rec.class_name} e2e",
                response_time=(rec.e2e_ns or 0) / 1e6,
                response_length=rec.output_tokens or 0,
                exception=None,
                context={},
            )
        else:
            # Locust keeps one error entry per distinct message for the whole run: numbers masked
            # (request ids, token counts, ports), so a server that echoes them cannot grow it per request
            kind, detail = reason_key(rec)
            fire(
                request_type="LLM",
                name=f"{rec.class_name} e2e",
                response_time=0.0,
                response_length=0,
                exception=Exception(f"{kind}: {detail}"[:200]),
                context={},
            )

    return report
