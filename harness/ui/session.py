"""The web UI's run session: one harness run per Locust test, on the shared run lifecycle.

A test started from the form (or headless) becomes one run directory: scenario.yaml,
requests.jsonl, progress.jsonl, load_result[.wK].json, engine_metrics.jsonl, and at the end
summary.json, histograms.json and the report, the same layout as `harness run`, because each test
is one run of the same run driver (harness.run.driver.RunDriver) and its target comes from the same
provider (harness.run.provider.TargetProvider: one built-in simulator for the session when there
is no --host). Locust's events drive the driver's steps: test_start prepares, resolves and
instruments the run; the workers' window marks (their messages, through the Collector) mark the
window; every worker's final result (or Stop) finishes it and writes its report. What stays here
is what Locust makes different: Locust starts and stops the load, the workers' results arrive as
messages (harness.load.distributed Collector), and the form may override the scenario's load.
Live values: harness.ui.live; the view: harness.ui.view; HTTP: harness.ui.routes.
"""

from __future__ import annotations

import logging
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from locust.env import Environment

from harness import limits
from harness.errors import UserError
from harness.load.collector import Collector
from harness.load.messages import Delta
from harness.metrics.exporter import MasterMetrics
from harness.metrics.exporter_server import MetricsServer, RunMetrics
from harness.metrics.recorder import MetricSet
from harness.results.layout import RunDir, default_run_dir
from harness.results.models.summary import RunSummary
from harness.run import finish
from harness.run.driver import RunDriver
from harness.run.options import RunOptions
from harness.run.provider import TargetProvider
from harness.scenario import load_scenario
from harness.scenario.models import Scenario
from harness.ui.guard import ScenarioChoices, check_form_host, fixed_target
from harness.ui.live import LiveStats
from harness.ui.routes import install
from harness.ui.stages import load_warnings, stage_spans, watch_stages
from harness.ui.view import build_view, engine_view

log = logging.getLogger("harness.web")

SERIES_EVERY_S = 1.0


class Run:
    def __init__(self, name: str, run_dir: RunDir, scenario: Scenario, scenario_path: str) -> None:
        self.name = name
        self.dir = run_dir
        self.scenario = scenario
        self.scenario_path = scenario_path
        self.info: dict[str, Any] = {}
        self.target_url = ""
        self.driver: RunDriver | None = None  # the run's lifecycle (harness.run.driver), set when the test starts
        self.live = LiveStats()
        self.started = time.time()
        self.window_start: float | None = None
        self.window_end: float | None = None  # the last worker's window end
        self.finished_at: float | None = None
        self.until_stopped = False
        self.users_seen: list[int] = []
        #: LoadTestShape stages: [{"stage": "1", "users": 8, "t": unix start}], one per change of Locust's target users
        self.stages: list[dict[str, Any]] = []
        self.stop_t: float | None = None  # when the test was asked to end (Stop, the shape's end, the window)
        self.ending = False  # Stop pressed / every worker done: the end is under way
        self.finalizing = False
        self.finalized = gevent.event.Event()
        self.summary: RunSummary | None = None  # summary.json once written
        #: the run's merged metrics, as written to histograms.json: once the run is written the
        #: cards and class table show these, not the live interval deltas (audit N5: 150 vs 152
        #: requests, TTFT p99 488.9 vs 327 ms on the same screen)
        self.final_metrics: MetricSet | None = None
        self.report: str | None = None  # "writing", "ok", "failed: ...", "off"
        self.missing: list[int] = []
        self.engine_base: dict[str, Any] = {}
        self.metrics: RunMetrics | None = None  # --metrics-port: this test's harness_* series
        self.exported: MasterMetrics | None = None  # ... fed by every worker's deltas

    @property
    def telemetry(self) -> Any:
        """The engine telemetry of the run (its live view), once instrumented."""
        driver = self.driver
        return driver.instruments.telemetry if driver is not None and driver.instruments is not None else None


class RunSession:
    """Turns each Locust test into a harness run; serves the live view."""

    def __init__(self, environment: Environment) -> None:
        self.env = environment
        opts = environment.parsed_options
        self.opts = opts
        self.headless = bool(getattr(opts, "headless", False))
        self.results_root = Path(getattr(opts, "results", "results") or "results")
        # fixed at start: the form may set any parsed option, so these are never read from opts again
        self.choices = ScenarioChoices.from_env(getattr(opts, "scenario", "") if opts else "")
        self.cli_host = (environment.host or "").rstrip("/") or None
        self.model = (getattr(opts, "model", "") if opts else "") or None
        self.state = "idle"
        self.error: list[str] = []
        self.run: Run | None = None
        self.runs: dict[str, Path] = {}
        #: where each test's target comes from: --host, the scenario, or the session's built-in simulator
        self.targets = TargetProvider(shlex.split(getattr(opts, "sim_args", "") or "") if opts else [])
        self._view_cache: tuple[float, dict[str, Any]] | None = None
        self.metrics_server: MetricsServer | None = None
        self.collector = Collector(environment, on_delta=self._on_delta, on_event=self._on_event)
        self.runner = self.collector.runner  # Locust's runner (the collector checked it exists)
        ev = environment.events
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stopping.add_listener(self._on_test_stopping)
        ev.spawning_complete.add_listener(self._on_spawned)
        ev.quitting.add_listener(self._on_quitting)
        gevent.spawn(watch_stages, self)
        self._prepare()
        self.ui_host = (environment.host or "").rstrip("/")  # what the form shows: --host or the simulator
        if environment.web_ui is not None:
            install(self, environment.web_ui)
        gevent.spawn(self._sampler)

    # ---------------------------------------------------------------- startup
    def _prepare(self) -> None:
        """Check the scenario, set the form's defaults from it, start the simulator if needed."""
        port = int(getattr(self.opts, "metrics_port", 0) or 0) if self.opts else 0
        if port:
            try:
                self.metrics_server = MetricsServer(port, getattr(self.opts, "metrics_host", "") or "127.0.0.1").start()
            except UserError as exc:
                for line in exc.lines:
                    print(f"harness: {line}", file=sys.stderr)
                self.env.process_exit_code = 2
                gevent.spawn_later(0.1, self.runner.quit)
                return
            print(f"harness: live metrics at {self.metrics_server.url}", file=sys.stderr)
        path = getattr(self.opts, "scenario", "") if self.opts else ""
        if not path:
            print(
                "harness: no scenario given. Pass --scenario FILE (harness ui SCENARIO does); the web form "
                "runs only scenarios given at start.",
                file=sys.stderr,
            )
            if self.headless:
                self.env.process_exit_code = 2
                gevent.spawn_later(0.1, self.runner.quit)
            return
        try:
            scenario = load_scenario(path)
        except UserError as exc:
            self._fail(exc.lines, stop=False)
            for line in exc.lines:
                print(f"harness: {line}", file=sys.stderr)
            if self.headless:
                self.env.process_exit_code = 2
                gevent.spawn_later(0.1, self.runner.quit)
            return
        load = scenario.load  # the form's defaults: the scenario's users and spawn rate (Load defines both)
        opts = self.opts
        assert opts is not None  # the scenario's path came from them
        if opts.num_users is None:
            opts.num_users = load.users
        if opts.spawn_rate is None:
            opts.spawn_rate = load.spawn_rate(opts.num_users)
        if not self.env.host and (not scenario.target.url or len(self.choices.files) > 1):
            self._start_sim(scenario)

    @property
    def sim(self) -> Any:
        """The session's built-in simulator (None: every test has a server given)."""
        return self.targets.sim

    def _start_sim(self, scenario: Scenario) -> None:
        """One simulator for the whole session (every test of the form may send to it)."""
        self.targets.log_dir = Path(tempfile.mkdtemp(prefix="harness-ui-sim-"))
        try:
            sim = self.targets.start(scenario)
        except UserError as exc:
            self._fail(exc.lines, stop=False)
            return
        self.env.host = sim.url
        print(
            f"harness: no --host: started the built-in simulated engine at {sim.url} (log {sim.log_path})",
            file=sys.stderr,
        )

    # ---------------------------------------------------------------- test start
    def _on_test_start(self, **_kw: Any) -> None:
        self.error = []
        self._view_cache = None
        try:
            self._begin()
        except UserError as exc:
            self._fail(exc.lines)
        except Exception as exc:  # shown in the UI, the test is stopped
            log.exception("harness: the run could not start")
            self._fail([f"the run could not start: {type(exc).__name__}: {exc}"])

    def _overrides(self, scenario_data: Scenario) -> dict[str, Any]:
        o = self.opts
        runner = self.env.runner
        users = int(getattr(runner, "target_user_count", 0) or 0)
        out: dict[str, Any] = {}
        rate = _number(getattr(o, "open_loop_rate", ""), "open-loop-rate")
        if rate is not None:
            out["load.rate"] = rate
        open_loop = rate is not None or scenario_data.load.open_loop
        if users > 0 and not scenario_data.load.offline:  # offline: the batch (load.requests) is the users
            if open_loop:
                out["load.max_in_flight"] = users  # the pool of users that send at the scheduled times
            else:
                out["load.concurrency"] = users
        window = _number(getattr(o, "measured_window", ""), "measured-window")
        if window is not None:
            out["load.duration_s"] = window if window > 0 else until_stopped_s()
        warmup = _number(getattr(o, "warmup", ""), "warmup")
        if warmup is not None:
            out["warmup.duration_s"] = warmup
            out["warmup.requests"] = 0
        if getattr(o, "no_telemetry", False):
            out["telemetry.enabled"] = False
        return out

    def _begin(self) -> None:
        """Start the test's run on the run driver, as `harness run` does (prepare, resolve,
        instrument), then hand the plan to the Locust workers; Locust, not this plugin, starts and
        stops the load."""
        path = str(self.choices.pick(getattr(self.opts, "scenario", "")))
        form_host, self.env.host = self.env.host, self.ui_host or None  # Locust copied the form's host there
        base = load_scenario(path)
        target, source = self._target(base)
        if _norm(form_host) != self.ui_host:
            check_form_host(form_host, target, source)
        overrides = self._overrides(base)
        scenario = load_scenario(path, overrides)
        run_dir = RunDir(default_run_dir(scenario.name, self.results_root)).create()
        run = Run(run_dir.root.name, run_dir, scenario, path)
        run.until_stopped = overrides.get("load.duration_s") == until_stopped_s()
        self.run = run
        self.runs[run.name] = run_dir.root.resolve()
        self.state = "starting"
        run.driver = driver = RunDriver(scenario, self._run_options(run_dir, path, target), self.targets)
        driver.start()
        if not target:
            raise UserError("no target: start harness ui with --target URL (or set target.url in the scenario)")
        prep = driver.resolve()
        run.scenario, run.target_url, run.info = prep.scenario, target, prep.info
        driver.instrument()
        if self.metrics_server is not None:
            # the workers (local, forked, or on other hosts) ship their counts in their deltas; this
            # process alone exports them, so each request counts once wherever it was measured
            run.exported = MasterMetrics()
            run.metrics = RunMetrics(
                self.metrics_server, run.name, prep.scenario, run.info.get("model"), prep.labels, source=run.exported
            )
        # users Locust removes mid-test (a LoadTestShape's next stage, fewer users in the UI) finish the
        # request in flight, up to the grace, instead of being killed mid-stream (a lost request, never
        # recorded); Locust hands this to its workers with every spawn message
        self.env.stop_timeout = max(
            float(getattr(self.env, "stop_timeout", 0) or 0), float(getattr(self.opts, "stop_grace", 30.0))
        )
        users = int(getattr(self.env.runner, "target_user_count", 0) or 0)
        if getattr(self.env, "shape_class", None) is not None:  # a LoadTestShape: one summary block per stage
            run.stages = [{"stage": "1", "users": users, "t": time.time()}]
        plan = prep.plan(
            stop_grace_s=driver.opts.stop_grace_s,
            live_metrics=self.metrics_server is not None,
            stage="1" if run.stages else None,
        )
        plan.write(run_dir.plan)  # credential headers masked in the file; the in-memory plan keeps them
        self.collector.begin(plan, run_dir.root)
        self.state = "warmup"
        users = int(getattr(self.env.runner, "target_user_count", 0) or 0)
        if users:
            run.users_seen.append(users)
        print(
            f"harness: run {run.name}: {scenario.name} -> {target} ({run.info['model']}), "
            f"{self.collector.n} load process(es); results in {run_dir.root}",
            file=sys.stderr,
        )

    def _run_options(self, run_dir: RunDir, path: str, target: str) -> RunOptions:
        """The run driver's options for one test: what makes a test from the form differ from
        `harness run` (no quality pass, no token calibration, no failed verdict, the stall meter
        in its own process since this one is a gevent loop)."""
        return RunOptions(
            out_dir=run_dir.root,
            target_url=target,
            model=self.model,
            scenario_path=path,
            scenario_dir=Path(path).resolve().parent,
            labels={"source": "locust-ui"},
            show_progress=False,
            write_report=not getattr(self.opts, "no_report", False),
            # every test starts cold: the previous test's prompts (same seed) must not be served from cache
            reset_prefix_cache=not getattr(self.opts, "no_reset_prefix_cache", False),
            reset_off_reason="--no-reset-prefix-cache",
            stop_grace_s=float(getattr(self.opts, "stop_grace", 30.0)),
            quality=False,
            calibrate=False,
            judge=False,
            stall_meter="process",
        )

    def _target(self, scenario: Scenario) -> tuple[str, str]:
        """The run's target: --target, else the scenario's target.url, else the simulator."""
        return fixed_target(self.cli_host, scenario.target.url, self.sim.url if self.sim is not None else None)

    def check_swarm_form(self, form: Any) -> list[str]:
        """The form's scenario and host, checked before Locust acts on them: [] or the error lines."""
        try:
            path = self.choices.pick(form.get("scenario", getattr(self.opts, "scenario", "")))
            target, source = self._target(load_scenario(path))
            if "host" in form and _norm(form.get("host")) != self.ui_host:
                check_form_host(form.get("host"), target, source)
        except UserError as exc:
            return exc.lines
        return []

    def _fail(self, lines: list[str], stop: bool = True) -> None:
        self.error = list(lines)
        self.state = "error"
        for line in lines:
            log.error("harness: %s", line)
        run = self.run
        if run is not None and run.driver is not None:
            run.driver.close()  # its telemetry and stall meter stop
        if stop:
            gevent.spawn(self.runner.stop)

    # ---------------------------------------------------------------- during the test
    def _on_spawned(self, user_count: int = 0, **_kw: Any) -> None:
        run = self.run
        if run is not None and not run.finalizing and (not run.users_seen or run.users_seen[-1] != user_count):
            run.users_seen.append(int(user_count))

    def _on_delta(self, _worker: int, delta: Delta) -> None:
        run = self.run
        if run is None:
            return
        if delta.metrics:
            run.live.add(delta.metrics)
            self._view_cache = None
        if run.exported is not None and delta.live:
            run.exported.add(_worker, delta.live)

    def _on_event(self, name: str, line: dict[str, Any]) -> None:
        run = self.run
        if run is None:
            return
        if name == "window_start":
            run.window_start = line.get("t", time.time())
            # Locust's RPS counts from the window (N16). Its counts need no reset: warmup requests
            # never reach Locust's stats (load.user.locust_reporter), and each WorkerAgent resets
            # its own stats when its window opens. A reset_all here, when the event arrives, erased
            # measured requests already counted (in-process: recorded before this message was
            # handled; distributed: a worker's stats report that overtook its window event).
            self.env.stats.total.start_time = float(run.window_start)
            self.state = "measuring"
            if run.driver is not None:
                run.driver.window_start()
        elif name == "worker_window_end":
            run.window_end = max(run.window_end or 0.0, float(line.get("t") or time.time()))
        elif name == "drained":
            if run.driver is not None:
                run.driver.window_end()
        elif name == "final":
            if run.exported is not None:
                run.exported.worker_done(int(line.get("worker", 0)))
            if self.state in ("warmup", "measuring"):
                self.state = "draining"
            if self.collector.all_final.is_set() and not run.ending:
                run.ending = True
                gevent.spawn(self._complete, run)

    def _complete(self, run: Run) -> None:
        """Every worker reached the scenario's stop condition: write the run, then end the test."""
        run.stop_t = run.stop_t or time.time()
        self._finalize(run, [])
        if self.headless:
            self.runner.quit()
        else:
            self.runner.stop()

    def _on_test_stopping(self, sync: bool = False, **_kw: Any) -> None:
        """Stop pressed, --run-time over, or quitting: workers drain and report before Locust
        stops them; only then does Locust go on (and a headless master quit). `sync`: write the
        run before returning (headless, or the process is about to exit)."""
        sync = sync or self.headless
        run = self.run
        if run is None or self.state in ("error", "idle"):
            return
        if run.ending:
            if sync:
                run.finalized.wait(120)
            return
        run.ending = True
        run.stop_t = time.time()
        if not self.collector.all_final.is_set():
            self.state = "draining"
            self.collector.stop_workers()
        missing = self.collector.wait_finals(self.collector.final_timeout_s())
        if sync:
            self._finalize(run, missing, sync=True)
        else:
            gevent.spawn(self._finalize, run, missing)

    def _sampler(self) -> None:
        while True:
            gevent.sleep(SERIES_EVERY_S)
            run = self.run
            if run is not None and self.state in ("warmup", "measuring", "draining"):
                try:
                    run.live.sample(engine_view(run), int(getattr(self.env.runner, "user_count", 0) or 0))
                except Exception:  # a chart point is never worth a crash
                    log.exception("harness: live sample failed")

    # ---------------------------------------------------------------- the end
    def _finalize(self, run: Run, missing: list[int], sync: bool = False) -> None:
        if run.finalizing:
            return
        run.finalizing = True
        self.state = "finishing"
        self._view_cache = None
        try:
            self._write_summary(run, missing)
            self.state = "finished"
        except Exception as exc:  # the UI must show it; the raw files stay
            log.exception("harness: writing the run failed")
            self.error = [f"writing {run.dir.root} failed: {type(exc).__name__}: {exc}"]
            self.state = "error"
        finally:
            run.finished_at = time.time()
            self.collector.close()
            if run.metrics is not None:
                run.metrics.close()  # final values stay served until the next test attaches
            run.finalized.set()
        if self.state == "finished" and run.driver is not None and run.driver.opts.write_report:
            if sync or self.headless:
                self._write_report(run)
            else:
                gevent.spawn(self._write_report, run)
        elif run.driver is not None and not run.driver.opts.write_report:
            run.report = "off"

    def _write_summary(self, run: Run, missing: list[int]) -> None:
        collector = self.collector
        results = [collector.results[k] for k in sorted(collector.results)]
        run.missing = missing
        assert run.driver is not None
        stopped_early = any(r != "done" for r in collector.reasons.values()) and not run.until_stopped
        status = "partial" if (missing or stopped_early or not results) else "complete"
        load = finish.load_block(run.scenario)
        if run.until_stopped:
            load["duration_s"] = None
            load["until_stopped"] = True
        warnings = []
        if missing:
            warnings.append(
                f"the final results of worker(s) {', '.join(map(str, missing))} did not arrive within "
                f"{collector.final_timeout_s():.0f} s: their requests are missing from these results"
            )
        if run.stages:
            load["stages"] = stage_spans(run)
        warnings += load_warnings(run)
        if stopped_early:
            warnings.append("the test was stopped before the scenario's stop condition")
        summary, metrics = run.driver.finish(
            results, status=status, processes=collector.n, load=load, warnings=warnings
        )
        run.final_metrics = metrics
        run.summary = summary
        print(
            f"harness: run {run.name} written to {run.dir.root} ({summary.requests.completed} requests, "
            f"status {status})",
            file=sys.stderr,
        )

    def _write_report(self, run: Run) -> None:
        """The run driver's report step, on a thread of gevent's pool: rendering the figures takes
        seconds of CPU, and the web UI keeps answering meanwhile."""
        run.report = "writing"
        self._view_cache = None
        driver = run.driver
        assert driver is not None
        try:
            gevent.get_hub().threadpool.apply(driver.report)
            run.report = "ok"
        except Exception as exc:  # shown in the UI; the run stands without its report
            log.exception("harness: the report of %s was not written", run.name)
            run.report = f"failed: {type(exc).__name__}: {exc}"
        self._view_cache = None

    def _on_quitting(self, **_kw: Any) -> None:
        run = self.run
        if run is not None and self.state not in ("error", "idle"):
            self._on_test_stopping(sync=True)  # Ctrl-C / SIGTERM: the run is written before exit
        if run is not None and run.driver is not None and not run.finalizing:
            run.driver.close()
        self.targets.close()
        if self.metrics_server is not None:
            self.metrics_server.close()

    # ---------------------------------------------------------------- the view
    def view(self) -> dict[str, Any]:
        now = time.time()
        if self._view_cache is not None and now - self._view_cache[0] < 1.0:
            return self._view_cache[1]
        out = build_view(self)
        self._view_cache = (now, out)
        return out

    def base_path(self) -> str:
        return (getattr(self.opts, "web_base_path", "") or "").rstrip("/")


def until_stopped_s() -> float:
    """ "Until Stop" (a measured window of 0 in the form): the longest window a scenario may ask
    for (HARNESS_MAX_DURATION_S), longer than any test; the summary says until_stopped instead."""
    return float(limits.DURATION.value)


def _number(text: Any, name: str) -> float | None:
    if text is None or str(text).strip() == "":
        return None
    try:
        value = float(str(text).strip())
    except ValueError:
        raise UserError(f"{name}: {text!r} is not a number") from None
    if value < 0:
        raise UserError(f"{name}: must be >= 0 (got {value:g})")
    return value


def _norm(url: Any) -> str:
    return str(url or "").strip().rstrip("/")
