"""The Locust plugin's master side: one harness run per Locust test, live LLM metrics in the web UI.

Loaded by harness/load/locustfile.py (`harness ui SCENARIO`, or `locust -f <that file>
--scenario FILE`). Roles, by Locust runner:

- LocalRunner (web UI or headless, one process): a RunSession here plus a WorkerAgent
  (harness.load.distributed) that measures in-process.
- MasterRunner (`--processes N`, or `--master` with `harness worker` on other machines): a
  RunSession; each worker process runs a WorkerAgent on its share of the request stream.
- WorkerRunner: a WorkerAgent only.

A test started from the form (or headless) becomes one run directory: scenario.yaml,
requests.jsonl, progress.jsonl, load_result[.wK].json, engine_metrics.jsonl, and at the end
summary.json (harness.results.build), histograms.json and the report, the same layout as
`harness run`. Live values come from the workers' per-interval HDR deltas: percentiles are those
of the measured window so far (lossless merges, not Locust's rounded buckets); rates cover the
last 10 s. The UI gets them three ways: an "LLM" tab and an "LLM run" tab in Locust's own page
(template_args extended_tabs/extended_tables, rows added to /stats/requests), and a dashboard
at /llm (./web/llm.html) with charts and the report link.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from harness.errors import UserError
from harness.load.distributed import Collector, WorkerAgent
from harness.load.web_guard import (
    ScenarioChoices,
    check_form_host,
    fixed_target,
    refuse_cross_site,
)
from harness.load.plan import LoadPlan
from harness.metrics.hdr import LATENCY, PERCENTILES, Histogram
from harness.metrics.recorder import ALL, ClassMetrics, MetricSet
from harness.metrics.stall_meter import StallMeterProcess
from harness.results.build import build_summary
from harness.results.layout import (
    RunDir,
    default_run_dir,
    write_json_atomic,
    write_text_atomic,
)
from harness.scenario import load_scenario
from harness.workload.fingerprint import fingerprint
from harness.scenario.loader import dump_scenario
from harness.scenario.models import Scenario

log = logging.getLogger("harness.web")

ASSETS = Path(__file__).with_name("web")
RATE_WINDOW_S = 10.0
SERIES_EVERY_S = 1.0
SERIES_MAX = 900
UNTIL_STOPPED_S = 10 * 86400.0  # "until Stop": a window longer than any test
NS_PER_MS = 1e6

#: the LLM tab's columns (Locust camel-cases the keys on both sides)
LLM_TABLE = [
    {"key": "cls", "title": "Class"},
    {"key": "requests", "title": "Requests"},
    {"key": "fails", "title": "Fails"},
    {"key": "rps", "title": "Req/s"},
    {"key": "tok_s", "title": "Out tok/s"},
    {"key": "ttft_p50", "title": "TTFT p50 (ms)"},
    {"key": "ttft_p90", "title": "TTFT p90"},
    {"key": "ttft_p99", "title": "TTFT p99"},
    {"key": "itl_p50", "title": "ITL p50 (ms/token)"},
    {"key": "itl_p90", "title": "ITL p90"},
    {"key": "itl_p99", "title": "ITL p99"},
    {"key": "tpot_p50", "title": "TPOT p50 (ms)"},
    {"key": "tpot_p90", "title": "TPOT p90"},
    {"key": "tpot_p99", "title": "TPOT p99"},
]
RUN_TABLE = [{"key": "item", "title": "Item"}, {"key": "value", "title": "Value"}]


# ====================================================================== command line
def add_arguments(parser: Any) -> None:
    """Locust's init_command_line_parser listener: the plugin's flags (some in the web form)."""
    g = parser  # Locust's parser takes include_in_web_ui only on add_argument itself, not on groups
    listed = ScenarioChoices.from_env("").names()  # harness ui FILE...: the form offers only these
    g.add_argument("--scenario", default=listed[0] if listed else "", include_in_web_ui=True,
                   choices=listed or None,
                   help="harness scenario YAML (one of the files the UI was started with): what to send, how fast, "
                        "what counts as good")
    g.add_argument("--measured-window", default="", include_in_web_ui=True,
                   help="seconds; empty = the scenario's stop condition; 0 = until Stop")
    g.add_argument("--open-loop-rate", default="", include_in_web_ui=True,
                   help="requests/s, users become the pool that sends at the scheduled times; empty = the scenario's load mode")
    g.add_argument("--warmup", default="", include_in_web_ui=True,
                   help="seconds before the measured window, not measured; empty = the scenario's warmup")
    g.add_argument("--model", default="", include_in_web_ui=False, help="model name (default: the first of /v1/models)")
    g.add_argument("--results", default="results", include_in_web_ui=False,
                   help="where run directories go (default: results/)")
    g.add_argument("--sim-args", default="", include_in_web_ui=False,
                   help='flags for the built-in simulated engine when there is no --host, e.g. "--max-num-seqs 8"')
    g.add_argument("--stop-grace", type=float, default=30.0, include_in_web_ui=False,
                   help="seconds in-flight requests may finish after the window ends or Stop (default 30)")
    g.add_argument("--no-telemetry", action="store_true", default=False, include_in_web_ui=False,
                   help="do not scrape the engine's /metrics")
    g.add_argument("--no-report", action="store_true", default=False, include_in_web_ui=False,
                   help="do not write report.md/html at the end of a test")
    g.add_argument("--no-reset-prefix-cache", action="store_true", default=False, include_in_web_ui=False,
                   help="keep the engine's prefix cache between tests (default: reset it before each test, or salt "
                        "the prompts where it cannot be reset)")
    # the plugin drives real engines: keep the UI on loopback unless told otherwise
    parser.set_defaults(web_host="127.0.0.1")


def on_init(environment: Environment, **_kw: Any) -> None:
    """Locust's init listener: give this process its role."""
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        WorkerAgent(environment)
        return
    session = RunSession(environment)
    if not isinstance(runner, MasterRunner):
        WorkerAgent(environment)  # after the session: its test_start hands out the plan first
    environment.harness_session = session  # type: ignore[attr-defined]


# ====================================================================== live statistics
class _Second:
    """What the last-seconds view keeps of one second of deltas: counts per class, and the two
    histograms the charts need (all classes). Full per-class sets would cost ~1.3 MB each."""

    __slots__ = ("t", "counts", "ttft", "itl")

    def __init__(self, t: int) -> None:
        self.t = t
        self.counts: dict[str, list[int]] = {}  # class -> [completed, output tokens]
        self.ttft = Histogram(LATENCY)
        self.itl = Histogram(LATENCY)


class LiveStats:
    """Merges the workers' interval histograms: the whole window so far (lossless, every class
    and metric), and per-second counts and TTFT/ITL histograms for the last RATE_WINDOW_S."""

    def __init__(self) -> None:
        self.total = MetricSet()
        self.recent: deque[_Second] = deque()
        self.series: dict[str, list[Any]] = {k: [] for k in (
            "t", "rps", "tok_s", "ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "kv", "running", "waiting", "users")}
        self.first_t: float | None = None

    def add(self, metrics: dict[str, Any]) -> None:
        now = time.time()
        if self.first_t is None:
            self.first_t = now
        delta = MetricSet.from_dict(metrics)
        self.total.merge(delta)
        second = int(now)
        if not self.recent or self.recent[-1].t != second:
            self.recent.append(_Second(second))
        bucket = self.recent[-1]
        for name, cm in delta.by_class.items():
            c = bucket.counts.setdefault(name, [0, 0])
            c[0] += cm.counts["completed"]
            c[1] += cm.counts["output_tokens"]
            bucket.ttft.merge(cm.hist["ttft"])
            bucket.itl.merge(cm.hist["itl_token"])
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.recent and self.recent[0].t < now - RATE_WINDOW_S:
            self.recent.popleft()

    def _span(self, now: float) -> float:
        span = min(RATE_WINDOW_S, now - self.first_t) if self.first_t else RATE_WINDOW_S
        return max(span, 1.0)

    def rates(self) -> dict[str, dict[str, float]]:
        """{class or _all: {rps, tok_s}} over the last RATE_WINDOW_S seconds."""
        now = time.time()
        self._trim(now)
        span = self._span(now)
        sums: dict[str, list[int]] = {ALL: [0, 0]}
        for bucket in self.recent:
            for name, (n, tok) in bucket.counts.items():
                for key in (name, ALL):
                    acc = sums.setdefault(key, [0, 0])
                    acc[0] += n
                    acc[1] += tok
        return {name: {"rps": n / span, "tok_s": tok / span} for name, (n, tok) in sums.items()}

    def sample(self, engine: dict[str, Any], users: int) -> None:
        """One chart point: last-window rates and percentiles (all classes), engine gauges."""
        rates = self.rates()[ALL]
        ttft, itl = Histogram(LATENCY), Histogram(LATENCY)
        for bucket in self.recent:
            ttft.merge(bucket.ttft)
            itl.merge(bucket.itl)
        s = self.series
        s["t"].append(round(time.time(), 1))
        s["rps"].append(round(rates["rps"], 3))
        s["tok_s"].append(round(rates["tok_s"], 1))
        for key, h in (("ttft", ttft), ("itl", itl)):
            for p in ("p50", "p99"):
                s[f"{key}_{p}"].append(round(min(h.percentile(PERCENTILES[p]), h.max or 0) / NS_PER_MS, 3)
                                       if h.count else None)
        s["kv"].append(engine.get("kv_usage"))
        s["running"].append(engine.get("running"))
        s["waiting"].append(engine.get("waiting"))
        s["users"].append(users)
        if len(s["t"]) > SERIES_MAX:
            for v in s.values():
                del v[: len(v) - SERIES_MAX]


def _dist(cm: ClassMetrics, metric: str) -> dict[str, float | None]:
    st = cm.hist[metric].stats(NS_PER_MS)
    return {k: st.get(k) for k in ("p50", "p90", "p99", "mean", "max")} | {"count": st["count"]}


def _class_view(name: str, cm: ClassMetrics, rate: dict[str, float] | None) -> dict[str, Any]:
    c = cm.counts
    return {
        "name": name,
        "requests": c["completed"],
        "failed": c["failed"],
        "output_tokens": c["output_tokens"],
        "rps": (rate or {}).get("rps", 0.0),
        "tok_s": (rate or {}).get("tok_s", 0.0),
        "ttft": _dist(cm, "ttft"),
        "itl": _dist(cm, "itl_token"),
        "tpot": _dist(cm, "tpot"),
        "e2e": _dist(cm, "e2e"),
        "errors": dict(sorted(cm.errors.items())),
    }


# ====================================================================== one run
class Run:
    def __init__(self, name: str, run_dir: RunDir, scenario: Scenario, scenario_path: str) -> None:
        self.name = name
        self.dir = run_dir
        self.scenario = scenario
        self.scenario_path = scenario_path
        self.info: dict[str, Any] = {}
        self.target_url = ""
        self.telemetry: Any = None
        self.stall: StallMeterProcess | None = None  # host stalls, measured outside gevent
        self.live = LiveStats()
        self.started = time.time()
        self.window_start: float | None = None
        self.finished_at: float | None = None
        self.until_stopped = False
        self.users_seen: list[int] = []
        self.ending = False  # Stop pressed / every worker done: the end is under way
        self.finalizing = False
        self.finalized = gevent.event.Event()
        self.summary: dict[str, Any] | None = None
        self.report: str | None = None  # "writing", "ok", "failed: ...", "off"
        self.missing: list[int] = []
        self.engine_base: dict[str, Any] = {}


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
        self.sim: Any = None
        self._view_cache: tuple[float, dict[str, Any]] | None = None
        self.collector = Collector(environment, on_delta=self._on_delta, on_event=self._on_event)
        ev = environment.events
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stopping.add_listener(self._on_test_stopping)
        ev.spawning_complete.add_listener(self._on_spawned)
        ev.quitting.add_listener(self._on_quitting)
        self._prepare()
        self.ui_host = (environment.host or "").rstrip("/")  # what the form shows: --host or the simulator
        if environment.web_ui is not None:
            self._install_web(environment.web_ui)
        gevent.spawn(self._sampler)

    # ---------------------------------------------------------------- startup
    def _prepare(self) -> None:
        """Check the scenario, set the form's defaults from it, start the simulator if needed."""
        path = getattr(self.opts, "scenario", "") if self.opts else ""
        if not path:
            print("harness: no scenario given. Pass --scenario FILE (harness ui SCENARIO does); the web form "
                  "runs only scenarios given at start.", file=sys.stderr)
            if self.headless:
                self.env.process_exit_code = 2
                gevent.spawn_later(0.1, self.env.runner.quit)
            return
        try:
            scenario = load_scenario(path)
        except UserError as exc:
            self._fail(exc.lines, stop=False)
            for line in exc.lines:
                print(f"harness: {line}", file=sys.stderr)
            if self.headless:
                self.env.process_exit_code = 2
                gevent.spawn_later(0.1, self.env.runner.quit)
            return
        load = scenario.load
        if self.opts.num_users is None:
            self.opts.num_users = load.concurrency if load.concurrency is not None else load.max_in_flight
        if self.opts.spawn_rate is None:
            users = self.opts.num_users
            self.opts.spawn_rate = users / load.ramp_s if (load.ramp_s > 0 and not load.open_loop) else float(users)
        if not self.env.host and (not scenario.target.url or len(self.choices.files) > 1):
            self._start_sim()

    def _start_sim(self) -> None:
        from harness.target import EmbeddedSim

        logdir = Path(tempfile.mkdtemp(prefix="harness-ui-sim-"))
        args = shlex.split(getattr(self.opts, "sim_args", "") or "")
        try:
            self.sim = EmbeddedSim(args, log_path=logdir / "sim.log").start()
        except UserError as exc:
            self._fail(exc.lines, stop=False)
            return
        self.env.host = self.sim.url
        print(f"harness: no --host: started the built-in simulated engine at {self.sim.url} (log {logdir / 'sim.log'})",
              file=sys.stderr)

    # ---------------------------------------------------------------- test start
    def _on_test_start(self, **_kw: Any) -> None:
        self.error = []
        self._view_cache = None
        try:
            self._begin()
        except UserError as exc:
            self._fail(exc.lines)
        except Exception as exc:  # noqa: BLE001 - shown in the UI, the test is stopped
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
        if users > 0:
            if open_loop:
                out["load.max_in_flight"] = users  # the pool of users that send at the scheduled times
            else:
                out["load.concurrency"] = users
        window = _number(getattr(o, "measured_window", ""), "measured-window")
        if window is not None:
            out["load.duration_s"] = window if window > 0 else UNTIL_STOPPED_S
        warmup = _number(getattr(o, "warmup", ""), "warmup")
        if warmup is not None:
            out["warmup.duration_s"] = warmup
            out["warmup.requests"] = 0
        if getattr(o, "no_telemetry", False):
            out["telemetry.enabled"] = False
        return out

    def _begin(self) -> None:
        from harness.target import preflight
        from harness.workload.generator import (
            WorkloadGenerator,
            expected_prefix_hit_rate,
        )
        from harness.workload.tokenizers import load_tokenizer

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
        run.until_stopped = overrides.get("load.duration_s") == UNTIL_STOPPED_S
        self.run = run
        self.runs[run.name] = run_dir.root.resolve()
        self.state = "starting"
        write_text_atomic(run_dir.scenario, dump_scenario(scenario))
        scenario_dir = Path(path).resolve().parent
        tokenizer = load_tokenizer(scenario.workload.tokenizer, scenario_dir)
        if not target:
            raise UserError("no target: start harness ui with --target URL (or set target.url in the scenario)")
        run.target_url = target
        model = self.model or scenario.target.model
        run.info = preflight(target, model or None, scenario)
        # every test starts cold: the previous test's prompts (same seed) must not be served from cache
        from harness.prefix_cache import isolate
        from harness.target import _auth_headers

        scenario, iso = isolate(scenario, target, _auth_headers(scenario),
                                reset=not getattr(self.opts, "no_reset_prefix_cache", False))
        run.scenario = scenario
        run.info["prefix_cache_isolation"] = iso.to_dict()
        if iso.mode == "salt":
            write_text_atomic(run_dir.scenario, dump_scenario(scenario))
        WorkloadGenerator(scenario, tokenizer, scenario_dir)  # a bad dataset file fails here, in one line
        if scenario.load.trace is not None:
            from harness.workload.arrivals.trace import load_gaps

            load_gaps(scenario.load.trace, scenario_dir)
        run.info["fingerprint"] = fingerprint(scenario, tokenizer.id, scenario_dir)
        if scenario.telemetry.enabled:
            from harness.telemetry.session import TelemetrySession

            run.telemetry = TelemetrySession(
                target_url=target, config=scenario.telemetry, out_dir=run_dir.root,
                expected_prefix_hit_rate=expected_prefix_hit_rate(scenario),
                engine_kind="sim" if self.sim is not None and target == self.sim.url else None,
            )
            run.telemetry.start()
        run.stall = StallMeterProcess(run_dir.root / "stall_meter.json").start()
        plan = LoadPlan(
            scenario=scenario.model_dump(mode="json"),
            scenario_dir=str(scenario_dir),
            target_url=target,
            model=run.info["model"],
            api_key_env=scenario.target.api_key_env,
            continuous_usage=run.info["continuous_usage"],
            out_dir=str(run_dir.root.resolve()),
            stop_grace_s=float(getattr(self.opts, "stop_grace", 30.0)),
        )
        run_dir.plan.write_text(plan.model_dump_json(indent=2))
        self.collector.begin(plan, run_dir.root)
        self.state = "warmup"
        users = int(getattr(self.env.runner, "target_user_count", 0) or 0)
        if users:
            run.users_seen.append(users)
        print(f"harness: run {run.name}: {scenario.name} -> {target} ({run.info['model']}), "
              f"{self.collector.n} load process(es); results in {run_dir.root}", file=sys.stderr)

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
        if run is not None and run.telemetry is not None:
            run.telemetry.stop()
        if run is not None and run.stall is not None:
            run.stall.stop()
        if stop:
            gevent.spawn(self.env.runner.stop)

    # ---------------------------------------------------------------- during the test
    def _on_spawned(self, user_count: int = 0, **_kw: Any) -> None:
        run = self.run
        if run is not None and not run.finalizing and (not run.users_seen or run.users_seen[-1] != user_count):
            run.users_seen.append(int(user_count))

    def _on_delta(self, _worker: int, data: dict[str, Any]) -> None:
        run = self.run
        if run is not None and data.get("metrics"):
            run.live.add(data["metrics"])
            self._view_cache = None

    def _on_event(self, name: str, line: dict[str, Any]) -> None:
        run = self.run
        if run is None:
            return
        if name == "window_start":
            run.window_start = line.get("t", time.time())
            self.state = "measuring"
            if run.telemetry is not None:
                run.telemetry.mark_window_start()
        elif name == "drained":
            if run.telemetry is not None:
                run.telemetry.mark_window_end()
        elif name == "final":
            if self.state in ("warmup", "measuring"):
                self.state = "draining"
            if self.collector.all_final.is_set() and not run.ending:
                run.ending = True
                gevent.spawn(self._complete, run)

    def _complete(self, run: Run) -> None:
        """Every worker reached the scenario's stop condition: write the run, then end the test."""
        self._finalize(run, [])
        if self.headless:
            self.env.runner.quit()
        else:
            self.env.runner.stop()

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
                    run.live.sample(self._engine(run), int(getattr(self.env.runner, "user_count", 0) or 0))
                except Exception:  # noqa: BLE001 - a chart point is never worth a crash
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
        except Exception as exc:  # noqa: BLE001 - the UI must show it; the raw files stay
            log.exception("harness: writing the run failed")
            self.error = [f"writing {run.dir.root} failed: {type(exc).__name__}: {exc}"]
            self.state = "error"
        finally:
            run.finished_at = time.time()
            self.collector.close()
            run.finalized.set()
        if self.state == "finished" and not getattr(self.opts, "no_report", False):
            if sync or self.headless:
                self._write_report(run)
            else:
                gevent.spawn(self._write_report, run)
        elif getattr(self.opts, "no_report", False):
            run.report = "off"

    def _write_summary(self, run: Run, missing: list[int]) -> None:
        from harness.runner import engine_reconcile, load_block

        collector = self.collector
        results = [collector.results[k] for k in sorted(collector.results)]
        run.missing = missing
        engine = run.telemetry.stop() if run.telemetry is not None else {}
        stopped_early = any(r != "done" for r in collector.reasons.values()) and not run.until_stopped
        status = "partial" if (missing or stopped_early or not results) else "complete"
        load = load_block(run.scenario)
        if run.until_stopped:
            load["duration_s"] = None
            load["until_stopped"] = True
        warnings = []
        if missing:
            warnings.append(f"the final results of worker(s) {', '.join(map(str, missing))} did not arrive within "
                            f"{collector.final_timeout_s():.0f} s: their requests are missing from these results")
        if len(set(run.users_seen)) > 1:
            warnings.append("the number of users changed during the test (" + " -> ".join(map(str, run.users_seen))
                            + "): the results mix load levels")
        if stopped_early:
            warnings.append("the test was stopped before the scenario's stop condition")
        sim = self.sim is not None and run.target_url == self.sim.url
        summary, metrics = build_summary(
            scenario={"name": run.scenario.name, "fingerprint": run.info.get("fingerprint"), "path": run.scenario_path,
                      "seed": run.scenario.seed},
            target={"url": run.target_url, "api": run.scenario.target.api, "model": run.info.get("model"),
                    "engine_kind": "sim" if sim else None, "simulated": sim,
                    "continuous_usage": run.info.get("continuous_usage"), "labels": {"source": "locust-ui"}},
            load=load,
            results=results,
            engine=engine,
            stall_meter=run.stall,
            reconcile_warnings=warnings,
            status=status,
            processes=collector.n,
        )
        summary.prefix_cache_isolation = run.info.get("prefix_cache_isolation")
        if run.telemetry is not None:
            from harness.prefix_cache import hit_rate_warning, workload_max_hit_rate
            from harness.workload.generator import expected_prefix_hit_rate

            extra = engine_reconcile(summary, engine)
            too_warm = hit_rate_warning(engine, workload_max_hit_rate(run.scenario, expected_prefix_hit_rate(run.scenario)))
            if too_warm:
                extra.append(too_warm)
            if extra:
                summary.validity["warnings"].extend(extra)
                summary.validity["ok"] = False
        write_json_atomic(run.dir.histograms, metrics.to_dict())
        data = summary.model_dump(mode="json")
        write_json_atomic(run.dir.summary, data)
        run.summary = data
        print(f"harness: run {run.name} written to {run.dir.root} ({summary.requests.completed} requests, "
              f"status {status})", file=sys.stderr)

    def _write_report(self, run: Run) -> None:
        run.report = "writing"
        self._view_cache = None
        try:
            proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "report", str(run.dir.root)],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode == 0 and (run.dir.root / "report.html").exists():
                run.report = "ok"
            else:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                run.report = f"failed: {tail[0]}"
        except (OSError, subprocess.SubprocessError) as exc:
            run.report = f"failed: {exc}"
        self._view_cache = None

    def _on_quitting(self, **_kw: Any) -> None:
        run = self.run
        if run is not None and self.state not in ("error", "idle"):
            self._on_test_stopping(sync=True)  # Ctrl-C / SIGTERM: the run is written before exit
        if run is not None and run.telemetry is not None and not run.finalizing:
            run.telemetry.stop()
        if run is not None and run.stall is not None and not run.finalizing:
            run.stall.stop()
        if self.sim is not None:
            self.sim.stop()

    # ---------------------------------------------------------------- the view
    def _engine(self, run: Run) -> dict[str, Any]:
        if run.telemetry is None:
            return {"enabled": False}
        if run.summary is not None and (run.summary.get("engine") or {}).get("kv_usage"):
            return _engine_over_window(run.summary["engine"])
        live = run.telemetry.live() or {}
        out: dict[str, Any] = {"enabled": True, "ok": bool(live.get("ok")), "error": live.get("error"),
                               "profile": live.get("profile")}
        for key in ("kv_usage", "running", "waiting"):
            out[key] = live.get(key)
        total = live.get("preemptions_total")
        if total is not None:
            run.engine_base.setdefault("preemptions_total", total)
            out["preemptions"] = total - run.engine_base["preemptions_total"]
        q, h = live.get("prefix_queries_total"), live.get("prefix_hits_total")
        if q is not None and h is not None:
            run.engine_base.setdefault("prefix_queries_total", q)
            run.engine_base.setdefault("prefix_hits_total", h)
            dq = q - run.engine_base["prefix_queries_total"]
            out["prefix_hit_rate"] = (h - run.engine_base["prefix_hits_total"]) / dq if dq > 0 else None
        return out

    def view(self) -> dict[str, Any]:
        now = time.time()
        if self._view_cache is not None and now - self._view_cache[0] < 1.0:
            return self._view_cache[1]
        out = self._view()
        self._view_cache = (now, out)
        return out

    def _view(self) -> dict[str, Any]:
        base = self._base_path()
        run = self.run
        runner = self.env.runner
        out: dict[str, Any] = {
            "state": self.state,
            "error": self.error,
            "locust_state": getattr(runner, "state", None),
            "users": int(getattr(runner, "user_count", 0) or 0),
            "scenario_path": getattr(self.opts, "scenario", ""),
            "scenarios": self.choices.names(),
            "host": self.env.host,
            "simulated": self.sim is not None and self.env.host == self.sim.url,
        }
        if run is None:
            return out
        totals = self.collector.totals()
        load = run.scenario.load
        out.update({
            "run": run.name,
            "run_dir": str(run.dir.root.resolve()),
            "scenario": run.scenario.name,
            "target": run.target_url,
            "model": run.info.get("model"),
            "mode": "open" if load.open_loop else "closed",
            "rate": load.rate,
            "duration_s": None if run.until_stopped else load.duration_s,
            "requests_target": load.requests,
            "elapsed_s": totals.get("elapsed_s", 0.0),
            "workers": self.collector.n,
            "progress": totals,
            "engine": self._engine(run),
            "series": run.live.series,
            "files": f"{base}/llm/runs/{run.name}/",
        })
        rates = run.live.rates()
        out["rates_over"] = "last 10 s"
        if run.summary is not None:  # finished: whole-window rates, as in summary.json
            s = run.summary
            rates = {name: {"rps": c["requests"]["rps"], "tok_s": c["tokens"]["output_per_s"]}
                     for name, c in s.get("per_class", {}).items()}
            rates[ALL] = {"rps": s["requests"]["rps"], "tok_s": s["tokens"]["output_per_s"]}
            out["rates_over"] = "whole run"
        classes = run.live.total.classes
        rows = [_class_view(name, cm, rates.get(name)) for name, cm in classes.items() if name != ALL]
        rows.append(_class_view("All classes", classes[ALL], rates.get(ALL)))
        out["classes"] = rows
        out["errors"] = rows[-1]["errors"]
        if run.summary is not None:
            s = run.summary
            out["final"] = {
                "status": s.get("status"),
                "rps": s["requests"]["rps"],
                "tok_s": s["tokens"]["output_per_s"],
                "window_s": s["window"]["duration_s"],
                "completed": s["requests"]["completed"],
                "failed": s["requests"]["failed"],
                "warnings": s.get("validity", {}).get("warnings", []),
            }
        out["report"] = run.report
        if run.report == "ok":
            out["report_url"] = f"{base}/llm/runs/{run.name}/report.html"
        if run.summary is not None:
            out["summary_url"] = f"{base}/llm/runs/{run.name}/summary.json"
        return out

    def _base_path(self) -> str:
        return (getattr(self.opts, "web_base_path", "") or "").rstrip("/")

    # ---------------------------------------------------------------- Locust's page
    def llm_rows(self, view: dict[str, Any]) -> list[dict[str, str]]:
        rows = []
        for c in view.get("classes", []):
            rps, tok_s = c["rps"], c["tok_s"]
            rows.append({
                "cls": c["name"],
                "requests": f"{c['requests']:,}",
                "fails": f"{c['failed']:,}",
                "rps": f"{rps:,.2f}",
                "tok_s": f"{tok_s:,.0f}",
                **{f"ttft_{p}": _ms(c["ttft"][p], 1) for p in ("p50", "p90", "p99")},
                **{f"itl_{p}": _ms(c["itl"][p], 2) for p in ("p50", "p90", "p99")},
                **{f"tpot_{p}": _ms(c["tpot"][p], 2) for p in ("p50", "p90", "p99")},
            })
        return rows

    def run_rows(self, view: dict[str, Any]) -> list[dict[str, str]]:
        rows: list[tuple[str, str]] = [("State", _STATE_TEXT.get(view["state"], view["state"]))]
        for line in view.get("error") or []:
            rows.append(("Error", line))
        if "run" in view:
            elapsed = view.get("elapsed_s") or 0.0
            dur = view.get("duration_s")
            final = view.get("final")
            if final:  # the window summary.json reports (incl. the drain), as the Result row says
                rows.append(("Measured window", f"{final['window_s']:,.1f} s (incl. drain)" + (f"; {dur:,.0f} s asked" if dur else "")))
            else:
                rows.append(("Measured window", f"{elapsed:,.1f} s" + (f" of {dur:,.0f} s" if dur else "")))
            p = view["progress"]
            rows.append(("Requests sent / done / failed / in flight",
                         f"{p.get('sent', 0):,} / {p.get('done', 0):,} / {p.get('failed', 0):,} / {p.get('in_flight', 0):,}"))
            rows.append(("Load processes", str(view.get("workers", 0))))
            e = view.get("engine", {})
            if e.get("enabled"):
                if e.get("over"):
                    rows.append(("Engine values", e["over"]))
                if e.get("ok"):
                    rows.append(("Engine KV cache usage", _pct(e.get("kv_usage"))))
                    rows.append(("Engine requests running / waiting",
                                 f"{_num(e.get('running'))} / {_num(e.get('waiting'))}"))
                    rows.append(("Engine preemptions (this test)", _num(e.get("preemptions"))))
                    if e.get("prefix_hit_rate") is not None:
                        rows.append(("Engine prefix cache hit rate (this test)", _pct(e.get("prefix_hit_rate"))))
                else:
                    rows.append(("Engine telemetry", e.get("error") or "waiting for the first scrape"))
            else:
                rows.append(("Engine telemetry", "off"))
            for kind, n in (view.get("errors") or {}).items():
                rows.append((f"Errors: {kind}", f"{n:,}"))
            final = view.get("final")
            if final:
                rows.append(("Result", f"{final['status']}: {final['completed']:,} requests in "
                                       f"{final['window_s']:,.1f} s, {final['rps']:,.2f} req/s, {final['tok_s']:,.0f} tok/s"))
                for w in final["warnings"]:
                    rows.append(("Warning", w))
            rows.append(("Run directory", view["run_dir"]))
            report = view.get("report")
            if view.get("report_url"):
                rows.append(("Report", view["report_url"]))
            elif report:
                rows.append(("Report", {"writing": "writing ...", "off": "off (--no-report)"}.get(report, report)))
        rows.append(("Live dashboard", f"{self._base_path()}/llm"))
        return [{"item": k, "value": v} for k, v in rows]

    def _install_web(self, web_ui: Any) -> None:
        from flask import Response, abort, jsonify, request, send_from_directory

        base = self._base_path()
        web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": "llm"}, {"title": "LLM run", "key": "llm_run"}]
        web_ui.template_args["extended_tables"] = [{"key": "llm", "structure": LLM_TABLE},
                                                   {"key": "llm_run", "structure": RUN_TABLE}]
        web_ui.template_args["extended_csv_files"] = [
            {"href": f"{base}/llm", "title": "LLM live dashboard (percentiles from HDR histograms, report link)"},
            {"href": f"{base}/llm/api/live", "title": "LLM live values (JSON)"},
        ]
        app = web_ui.app
        auth = web_ui.auth_required_if_enabled
        loopback_only = _is_loopback_bind(getattr(self.opts, "web_host", "") or "")

        @app.before_request
        def guard() -> Any:
            """No state change from another site's page; the form picks only what the CLI allowed."""
            why = refuse_cross_site(request.method, request.headers, loopback_only)
            if why:
                log.warning("harness: refused %s %s: %s", request.method, request.path, why)
                return jsonify({"success": False, "message": f"refused: {why}"}), 403
            if request.method == "POST" and request.path == f"{base}/swarm":
                lines = self.check_swarm_form(request.form)
                if lines:
                    return jsonify({"success": False, "message": "; ".join(lines), "host": self.env.host}), 400
            return None

        @app.route(f"{base}/llm")
        @auth
        def llm_page() -> Any:
            return send_from_directory(ASSETS, "llm.html")

        @app.route(f"{base}/llm/assets/<path:name>")
        @auth
        def llm_assets(name: str) -> Any:
            return send_from_directory(ASSETS, name)

        @app.route(f"{base}/llm/api/live")
        @auth
        def llm_live() -> Any:
            return jsonify(self.view())

        @app.route(f"{base}/llm/runs/<run>/<path:name>")
        @auth
        def llm_run_file(run: str, name: str) -> Any:
            root = self.runs.get(run)
            if root is None:
                abort(404)
            return send_from_directory(root, name)

        @app.after_request
        def add_llm_rows(resp: Response) -> Response:
            if request.path == f"{base}/stats/requests" and resp.mimetype == "application/json":
                try:
                    data = json.loads(resp.get_data())
                    view = self.view()
                    data["extended_stats"] = [{"key": "llm", "data": self.llm_rows(view)},
                                              {"key": "llm_run", "data": self.run_rows(view)}]
                    resp.set_data(json.dumps(data))
                except Exception:  # noqa: BLE001 - Locust's own page must keep working
                    log.exception("harness: could not add the LLM rows")
            return resp


_STATE_TEXT = {
    "idle": "idle: start a test from the form",
    "starting": "starting (preflight, telemetry)",
    "warmup": "warming up (not measured)",
    "measuring": "measuring",
    "draining": "draining: in-flight requests finish",
    "finishing": "writing summary.json",
    "finished": "finished",
    "error": "error",
}


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


def _is_loopback_bind(host: str) -> bool:
    """Whether the web UI listens on loopback only (then a Host that is not loopback is a rebinding)."""
    import ipaddress

    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # '*', '', a name: reachable from elsewhere, any Host is possible


def _ms(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _num(value: Any) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _engine_over_window(engine: dict[str, Any]) -> dict[str, Any]:
    """After the run the engine cards show the measured window (max; preemptions and prefix hits
    over it), from summary.json, not the idle engine's current 0 % (audit D14)."""
    def get(key: str, field: str) -> Any:
        block = engine.get(key)
        return block.get(field) if isinstance(block, dict) else None

    return {"enabled": True, "ok": True, "error": None, "profile": engine.get("profile"),
            "over": "over the measured window (max; preemptions and prefix hits: totals)",
            "kv_usage": get("kv_usage", "max"), "running": get("running", "max"), "waiting": get("waiting", "max"),
            "preemptions": get("preemptions", "count"), "prefix_hit_rate": get("prefix_cache", "hit_rate")}
