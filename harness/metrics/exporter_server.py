"""Live harness metrics, the runner's side: one run's metrics directory and labels, the HTTP server.

The runner (a plain process) makes a fresh PROMETHEUS_MULTIPROC_DIR per run and serves the
aggregate of its load processes' mmap files (prometheus_client's MultiProcessCollector), adding the
run's labels to every series, plus `harness_run_info` and the target load. The load processes'
side is harness.metrics.exporter (see its docstring for the design).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from harness.metrics.exporter import ENV_DIR

_LABEL_RE = re.compile(r"[^a-zA-Z0-9_]")


def _label_name(key: str) -> str:
    name = _LABEL_RE.sub("_", key)
    if not name or name[0].isdigit():
        name = "_" + name
    return name


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunMetrics:
    """One run's metrics directory and labels; collected by a `MetricsServer`."""

    def __init__(
        self,
        server: MetricsServer | None,
        run_id: str,
        scenario: Any,
        model: str | None,
        labels: dict[str, str] | None = None,
        own_server: bool = False,
        source: Any = None,
    ) -> None:
        """`source`: the families to serve (a harness.metrics.exporter.MasterMetrics in this process,
        the web UI's master); None: a fresh multiprocess directory the load processes write to."""
        labels = dict(labels or {})
        self.server = server
        self.own_server = own_server
        self.source = source
        self.dir = "" if source is not None else tempfile.mkdtemp(prefix="harness-metrics-")
        self.env = (
            {**os.environ, "PROMETHEUS_MULTIPROC_DIR": self.dir, ENV_DIR: self.dir} if self.dir else dict(os.environ)
        )
        self.series_labels = {
            "run": run_id,
            "scenario": getattr(scenario, "name", str(scenario)),
            "config": str(labels.get("config", "")),
            "model": model or "",
        }
        info = {_label_name(k): str(v) for k, v in labels.items()}
        info.update(self.series_labels)
        self.info = info
        self.target_rate: float | None = None
        self.target_users: int | None = None
        load = getattr(scenario, "load", None)
        if load is not None:
            if getattr(load, "open_loop", False):
                self.target_rate = load.rate
                self.target_users = load.max_in_flight
            else:
                self.target_users = load.concurrency
        self.expected_prefix_hit_rate: float | None = None
        if load is not None:
            try:
                from harness.workload.generator import expected_prefix_hit_rate

                self.expected_prefix_hit_rate = expected_prefix_hit_rate(scenario)
            except Exception:  # an optional gauge
                pass
        self.started = time.time()
        self._final: list[Any] | None = None
        self._lock = threading.Lock()
        if server is not None:
            server.attach(self)

    @property
    def url(self) -> str | None:
        return self.server.url if self.server is not None else None

    def collect(self) -> Iterator[Any]:
        with self._lock:
            if self._final is not None:
                yield from self._final
                return
            yield from self._collect()

    def _collect(self) -> list[Any]:
        from prometheus_client.metrics_core import GaugeMetricFamily, Metric
        from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

        out: list[Any] = []
        extra = self.series_labels
        names = list(extra)
        values = [extra[n] for n in names]
        info = GaugeMetricFamily(
            "harness_run_info", "The run being measured: run id, scenario, model, sweep labels.", labels=list(self.info)
        )
        info.add_metric(list(self.info.values()), 1.0)
        out.append(info)
        start = GaugeMetricFamily("harness_run_start_time_seconds", "When the run started (Unix time).", labels=names)
        start.add_metric(values, self.started)
        out.append(start)
        if self.target_rate is not None:
            g = GaugeMetricFamily(
                "harness_target_rate_requests_per_second",
                "Open loop: the scenario's target request rate.",
                labels=names,
            )
            g.add_metric(values, float(self.target_rate))
            out.append(g)
        if self.target_users is not None:
            g = GaugeMetricFamily(
                "harness_target_users", "Closed loop: concurrency; open loop: max in flight.", labels=names
            )
            g.add_metric(values, float(self.target_users))
            out.append(g)
        if self.expected_prefix_hit_rate is not None:
            g = GaugeMetricFamily(
                "harness_expected_prefix_hit_rate",
                "Prefix-cache hit rate the scenario's shared prefixes should give (0-1).",
                labels=names,
            )
            g.add_metric(values, float(self.expected_prefix_hit_rate))
            out.append(g)
        if self.source is not None:
            for fam in self.source.collect():
                m = Metric(fam.name, fam.documentation, fam.type, fam.unit)
                m.samples = [s._replace(labels={**s.labels, **extra}) for s in fam.samples]
                out.append(m)
            return out
        if not os.path.isdir(self.dir):
            return out
        for fname in os.listdir(self.dir):  # live gauges of exited load processes no longer count
            if fname.startswith("gauge_live") and fname.endswith(".db"):
                try:
                    pid = int(fname[:-3].rsplit("_", 1)[1])
                except ValueError:
                    continue
                if not _alive(pid):
                    mark_process_dead(pid, self.dir)
        for fam in MultiProcessCollector(None, self.dir).collect():
            m = Metric(fam.name, fam.documentation, fam.type, fam.unit)
            m.samples = [s._replace(labels={**s.labels, **extra}) for s in fam.samples]
            out.append(m)
        return out

    def close(self) -> None:
        """Freeze the final values (still served until the next run attaches), remove the files."""
        with self._lock:
            if self._final is None:
                try:
                    self._final = self._collect()
                except Exception:  # an unreadable process file: the final values are none, the close goes on
                    self._final = []
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)
        if self.own_server and self.server is not None:
            self.server.close()


class MetricsServer:
    """`/metrics` on host:port (127.0.0.1 by default) for the run attached now (or the last one)."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self._run: RunMetrics | None = None
        self._httpd: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> MetricsServer:
        from prometheus_client import CollectorRegistry, start_http_server

        from harness.errors import UserError

        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        try:
            self._httpd, self._thread = start_http_server(self.port, addr=self.host, registry=registry)
        except OSError as exc:
            raise UserError(
                f"--metrics-port {self.port}: cannot serve metrics on {self.host}:{self.port} ({exc.strerror or exc})"
            ) from None
        self.port = self._httpd.server_address[1]
        return self

    def attach(self, run: RunMetrics) -> None:
        self._run = run

    def collect(self) -> Iterable[Any]:
        run = self._run
        if run is None:
            return []
        return list(run.collect())

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None


def open_run(opts: Any, run_id: str, scenario: Any, model: str | None) -> RunMetrics | None:
    """The runner's entry point: a RunMetrics when `opts` asks for metrics, else None.

    `opts.metrics_server` (a started MetricsServer shared by a sweep) wins over
    `opts.metrics_port` (a server for this run only, closed with it).
    """
    server = getattr(opts, "metrics_server", None)
    own = False
    if server is None:
        port = getattr(opts, "metrics_port", None)
        if not port:
            return None
        server = MetricsServer(port, getattr(opts, "metrics_host", None) or "127.0.0.1").start()
        own = True
    return RunMetrics(server, run_id, scenario, model, getattr(opts, "labels", None), own_server=own)
