"""Live harness metrics for Prometheus: the client's view (what users feel) while a run lasts.

This module: the histograms (from the metric table) and the load processes' side (`LoadMetrics`);
harness.metrics.exporter_server: the runner's side (`RunMetrics`, `MetricsServer`, `open_run`);
harness.load.live_metrics: the gevent flush loop and the Finisher hook.

Design: prometheus_client's multiprocess mode.

- The runner (`harness run --metrics-port P`, a plain process) makes a fresh directory per run
  and starts its load processes with `PROMETHEUS_MULTIPROC_DIR` and `HARNESS_METRICS_DIR` set to
  it. Each load process writes its samples into its own mmap files there; the runner serves the
  aggregate over HTTP (`MultiProcessCollector`), adding the run's labels (`run`, `scenario`,
  `config`, `model`) to every series, plus `harness_run_info` (every RunOptions label) and the
  target load. Load processes know nothing about labels, ports or the server.
- The hot path is untouched: the load process's `Finisher` (harness/load/user.py) already
  handles finished requests when the event loop is idle; `LoadMetrics.observe(rec)` only adds
  to per-class bucket counts in plain Python lists (per-token ITL: one bisect per chunk, numpy
  for long streams). Once a second, when the loop is idle, the pending counts are written to the
  mmap files in one batch (one `inc` per changed bucket), with in-flight, users, sends and CPU.
- Latency histograms and token counters hold *measured* requests only (warmup excluded, as in
  summary.json); `harness_requests_total` has a `phase` label and counts warmup too.
- A run's series stay served until the next run attaches (sweeps) or the server closes, frozen
  at their final values.

Why multiprocess mode fits: load processes are local children of the runner, counters and
histograms of exited processes keep their final values, and live gauges (`livesum`) of exited
processes are dropped at collect time.

Locust workers (`harness run --distributed`, `harness ui --processes/--master` with `harness
worker` on any host) export nothing themselves: each keeps a `LiveCounts` and ships its `take()`
in every interval delta to the master, whose `MasterMetrics` applies it. So a worker on another
host (its own filesystem, no shared directory) counts exactly like a local one, and nothing is
counted twice. The headless master of `harness run --distributed` writes to the run's mmap
directory like a load process; the web UI's master (`harness ui --metrics-port`) keeps the
values in memory and serves them itself.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from harness.metrics.table import LIVE

if TYPE_CHECKING:
    from harness.metrics.record import RequestRecord

ENV_DIR = "HARNESS_METRICS_DIR"  # set (with PROMETHEUS_MULTIPROC_DIR) only for runs that export

#: name -> (buckets, help), from the metric table's live entries (harness.metrics.table). Names get
#: the `harness_` prefix and `_seconds` unit.
HISTOGRAMS: dict[str, tuple[tuple[float, ...], str]] = {
    m.live.name: (m.live.buckets, m.live.help) for m in LIVE if m.live
}
_SOURCE = {m.live.name: m for m in LIVE if m.live}  # live name -> table entry
_PROMETHEUS = {m.live.name: m.live.prometheus for m in LIVE if m.live}  # live name -> exported histogram name
HIST_NAMES = tuple(HISTOGRAMS)
_BOUNDS_NS = {name: tuple(round(b * 1e9) for b in spec[0]) for name, spec in HISTOGRAMS.items()}

#: labels the runner adds to every harness_ series (empty values are dropped by Prometheus)
RUN_LABELS = ("run", "scenario", "config", "model")

#: streams with more chunks than this use numpy for per-token ITL
NUMPY_FROM = 80


# ============================================================================ load-process side
class _ClassAcc:
    """Pending (not yet flushed) observations of one request class."""

    __slots__ = ("counts", "input_tokens", "outcomes", "output_tokens", "sums")

    def __init__(self) -> None:
        self.counts = {name: [0] * (len(_BOUNDS_NS[name]) + 1) for name in HIST_NAMES}
        self.sums = dict.fromkeys(HIST_NAMES, 0)  # ns
        self.outcomes: dict[tuple[str, str], int] = {}  # (outcome, phase) -> n
        self.input_tokens = 0
        self.output_tokens = 0


class LiveCounts:
    """One load process's pending observations: cheap `observe(rec)`, `take()` of what changed.

    No prometheus_client objects: a distributed worker (possibly on another host) keeps only
    this and ships `take()` to its master in each interval delta (harness.load.messages.Delta),
    where `MasterMetrics.apply` adds it to the one exporter; a local load process is a
    `LoadMetrics`, which applies its own `take()` to its mmap files once a second.

    `ctrl` (a LoadController, optional): its `new_record` (called by the user right before
    the request bytes go out, after any wait for the intended send time) is wrapped to count
    sends, so in flight = sent - finished, not counting open-loop requests still waiting for
    their send time. `users` (a callable, set on Locust's test_start) gives the running users.
    """

    def __init__(self, ctrl: Any = None) -> None:
        self.ctrl = ctrl
        self.users: Callable[[], int] | None = None
        self._acc: dict[str, _ClassAcc] = {}
        self._sends = [0]  # bumped by the wrapped ctrl.new_record
        self._taken_sends = 0
        self._finished = 0
        self._cpu = time.process_time()
        self._np: Any = None
        self._bounds_np: dict[str, Any] = {}
        if ctrl is not None:
            self.attach(ctrl)

    # ---- per request (idle time, in the Finisher)
    def observe(self, rec: RequestRecord) -> None:
        acc = self._acc.get(rec.class_name)
        if acc is None:
            acc = self._acc[rec.class_name] = _ClassAcc()
        err = rec.error_kind
        key = (err or "ok", "warmup" if rec.warmup else "measure")
        acc.outcomes[key] = acc.outcomes.get(key, 0) + 1
        self._finished += 1
        if rec.warmup or err is not None:
            return
        acc.input_tokens += rec.input_tokens if rec.input_tokens is not None else rec.intended_input_tokens
        acc.output_tokens += rec.output_tokens or 0
        counts, sums = acc.counts, acc.sums
        d = rec.derived()  # the request's values, derived once (harness.metrics.table)
        for name, metric in _SOURCE.items():
            v = metric.sample(d)
            if v is None:
                continue
            bounds, bucket = _BOUNDS_NS[name], counts[name]
            if isinstance(v, list):
                if not v:
                    continue
                sums[name] += sum(v)
                if len(v) > NUMPY_FROM:
                    self._many(bucket, name, v)
                else:
                    for x in v:
                        bucket[bisect_left(bounds, x)] += 1
            else:
                bucket[bisect_left(bounds, v)] += 1
                sums[name] += v

    def _many(self, bucket: list[int], name: str, values: list[int]) -> None:
        """Long streams: one numpy searchsorted + bincount instead of a bisect per sample."""
        np = self._np
        if np is None:
            import numpy as np

            self._np = np
        bounds = self._bounds_np.get(name)
        if bounds is None:
            bounds = self._bounds_np[name] = np.asarray(_BOUNDS_NS[name], dtype=np.int64)
        per_bucket = np.bincount(np.searchsorted(bounds, np.asarray(values, dtype=np.int64)), minlength=len(bucket))
        for i, c in enumerate(per_bucket.tolist()):
            if c:
                bucket[i] += c

    # ---- once a second (idle time), and at exit
    def take(self) -> dict[str, Any]:
        """What changed since the last `take()`, as plain data (msgpack/JSON): per class the
        changed histograms' bucket counts and sums (ns), outcomes and tokens; the sends and CPU
        seconds since then; the in-flight requests and running users now."""
        classes: dict[str, Any] = {}
        for cls, acc in self._acc.items():
            out: dict[str, Any] = {}
            hist = {}
            for name in HIST_NAMES:
                counts = acc.counts[name]
                if any(counts):
                    hist[name] = [list(counts), acc.sums[name]]
                    acc.counts[name] = [0] * len(counts)
                    acc.sums[name] = 0
            if hist:
                out["hist"] = hist
            if acc.outcomes:
                out["outcomes"] = [[o, ph, n] for (o, ph), n in acc.outcomes.items()]
                acc.outcomes = {}
            if acc.input_tokens or acc.output_tokens:
                out["tokens"] = [acc.input_tokens, acc.output_tokens]
                acc.input_tokens = acc.output_tokens = 0
            if out:
                classes[cls] = out
        sends = self._sends[0]
        cpu = time.process_time()
        users = None
        if self.users is not None:
            try:
                users = int(self.users())
            except Exception:  # a gauge must never break the load
                users = None
        snap = {
            "classes": classes,
            "sent": sends - self._taken_sends,
            "cpu_s": cpu - self._cpu,
            "in_flight": max(0, sends - self._finished),
            "users": users,
        }
        self._taken_sends, self._cpu = sends, cpu
        return snap

    def attach(self, ctrl: Any) -> None:
        """Count the sends of `ctrl` (a process may run several controllers one after another)."""
        self.ctrl = ctrl
        if ctrl is None or not hasattr(ctrl, "new_record") or isinstance(ctrl.new_record, _CountedNewRecord):
            return
        ctrl.new_record = _CountedNewRecord(ctrl.new_record, self._sends)


class _CountedNewRecord:
    """A controller's `new_record`, counting the sends: one add per request; no clock, no I/O."""

    __slots__ = ("new_record", "sends")

    def __init__(self, new_record: Callable[[Any], Any], sends: list[int]) -> None:
        self.new_record = new_record
        self.sends = sends

    def __call__(self, item: Any) -> Any:
        self.sends[0] += 1
        return self.new_record(item)


class Families:
    """The harness_ metric families (prometheus_client objects, in no registry) and `apply`, which
    adds one `LiveCounts.take()` to them: one inc per changed bucket.

    In a process started with PROMETHEUS_MULTIPROC_DIR (a load process of `harness run`, the
    headless master of `harness run --distributed`) the values live in that directory's mmap files,
    which the runner collects; elsewhere (the web UI's master) they live in memory and
    `collect()` serves them.
    """

    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        reg = None  # never the global registry: the runner (or the UI's RunMetrics) collects them
        self.hist = {
            name: Histogram(_PROMETHEUS[name], doc, ["class"], buckets=buckets, registry=reg)
            for name, (buckets, doc) in HISTOGRAMS.items()
        }
        self.requests = Counter(
            "harness_requests",
            "Finished requests by class, outcome (ok or error kind) and phase (warmup, measure).",
            ["class", "outcome", "phase"],
            registry=reg,
        )
        self.input_tokens = Counter(
            "harness_input_tokens",
            "Prompt tokens of measured successful requests (server usage, else planned).",
            ["class"],
            registry=reg,
        )
        self.output_tokens = Counter(
            "harness_output_tokens", "Output tokens of measured successful requests.", ["class"], registry=reg
        )
        self.sent = Counter(
            "harness_requests_sent", "Requests sent (warmup and measured), sampled once a second.", registry=reg
        )
        self.cpu = Counter("harness_client_cpu_seconds", "CPU time of the load processes.", registry=reg)
        self.in_flight = Gauge(
            "harness_in_flight_requests",
            "Requests sent and not yet finished.",
            registry=reg,
            multiprocess_mode="livesum",
        )
        self.active_users = Gauge(
            "harness_active_users", "Running Locust users.", registry=reg, multiprocess_mode="livesum"
        )
        self._children: dict[str, Any] = {}
        self._lock = threading.Lock()  # flush may run from atexit while the loop is stopped

    def apply(self, snap: dict[str, Any]) -> None:
        """Add the counters and histograms of one `take()` (the gauges are the caller's: summed
        over workers on a master, this process's own in a load process)."""
        for cls, data in snap.get("classes", {}).items():
            children = self._children.get(cls)
            if children is None:
                children = self._children[cls] = {name: h.labels(cls) for name, h in self.hist.items()}
            for name, (counts, sum_ns) in data.get("hist", {}).items():
                child = children.get(name)
                if child is None:  # a worker of another harness version: a histogram this one lacks
                    continue
                # prometheus_client's Histogram child keeps non-cumulative per-bucket values in
                # _buckets (+Inf last) and the sum in _sum; tests/metrics/test_exporter.py checks
                # the result against a naive reference
                buckets = child._buckets
                for i, c in enumerate(counts[: len(buckets)]):
                    if c:
                        buckets[i].inc(c)
                child._sum.inc(sum_ns / 1e9)
            for outcome, phase, n in data.get("outcomes", []):
                self.requests.labels(cls, outcome, phase).inc(n)
            tokens = data.get("tokens")
            if tokens:
                self.input_tokens.labels(cls).inc(tokens[0])
                self.output_tokens.labels(cls).inc(tokens[1])
        if snap.get("sent"):
            self.sent.inc(snap["sent"])
        if snap.get("cpu_s"):
            self.cpu.inc(max(0.0, snap["cpu_s"]))

    def collect(self) -> Iterator[Any]:
        """The families' current values (in-memory mode), without prometheus_client's `_created`
        samples (the multiprocess collector has none either: the two modes serve the same series)."""
        for metric in (
            *self.hist.values(),
            self.requests,
            self.input_tokens,
            self.output_tokens,
            self.sent,
            self.cpu,
            self.in_flight,
            self.active_users,
        ):
            for fam in metric.collect():
                fam.samples = [s for s in fam.samples if not s.name.endswith("_created")]
                yield fam


class LoadMetrics(LiveCounts, Families):
    """A local load process's exporter: cheap `observe(rec)`, batched `flush()` to the mmap files."""

    def __init__(self, ctrl: Any = None) -> None:
        Families.__init__(self)
        LiveCounts.__init__(self, None)
        self.ctrl = ctrl

    def flush(self) -> None:
        with self._lock:
            snap = self.take()
            self.apply(snap)
            self.in_flight.set(snap["in_flight"])
            if snap["users"] is not None:
                self.active_users.set(snap["users"])


class MasterMetrics(Families):
    """The exporter of a Locust master (the web UI, `harness run --distributed`): every worker's
    `take()` arrives in its interval deltas and is applied here, so workers on other hosts count
    exactly like local ones, and each observation is counted once (the workers export nothing
    themselves). The gauges are the sums of each worker's latest values."""

    def __init__(self) -> None:
        super().__init__()
        self._in_flight: dict[int, int] = {}
        self._users: dict[int, int] = {}

    def add(self, worker: int, snap: dict[str, Any]) -> None:
        if not snap:
            return
        with self._lock:
            self.apply(snap)
            self._in_flight[worker] = int(snap.get("in_flight") or 0)
            if snap.get("users") is not None:
                self._users[worker] = int(snap["users"])
            self.in_flight.set(sum(self._in_flight.values()))
            if self._users:
                self.active_users.set(sum(self._users.values()))

    def worker_done(self, worker: int) -> None:
        """A worker's final delta: it has nothing in flight and no users any more."""
        with self._lock:
            self._in_flight[worker] = 0
            self._users[worker] = 0
            self.in_flight.set(sum(self._in_flight.values()))
            self.active_users.set(sum(self._users.values()))
