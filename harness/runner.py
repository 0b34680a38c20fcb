"""Run one scenario against one target, end to end.

Start the simulated engine when no target is given, preflight the target (reachable, model,
whether it accepts continuous usage), start telemetry and the stall meter, launch the load
process(es) (the only place gevent lives), follow their progress lines, then assemble
summary.json, print the table and write the report. Ctrl-C stops the load gracefully and still
writes what was measured (status "partial").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import RunFailed, UserError
from harness.load.plan import LoadPlan
from harness.metrics.exporter import open_run as open_metrics
from harness.metrics.stall_meter import StallMeter
from harness.results.build import build_summary
from harness.results.console import Progress, print_summary
from harness.results.layout import RunDir, write_json_atomic, write_text_atomic
from harness.results.schema import RunSummary
from harness.results.verdict import most_failed
from harness.workload.fingerprint import fingerprint
from harness.scenario.loader import dump_scenario
from harness.scenario.models import Scenario
from harness.signals import die_with_parent, stop_reason
from harness.target import EmbeddedSim, preflight
from harness.workload.arrivals.trace import load_gaps
from harness.workload.generator import WorkloadGenerator, expected_prefix_hit_rate
from harness.workload.tokenizers import load_tokenizer


@dataclass
class RunOptions:
    out_dir: Path
    target_url: str | None = None  # None: start the built-in simulated engine
    model: str | None = None
    sim_args: list[str] = field(default_factory=list)
    engine_kind: str | None = None  # hint for telemetry (vllm, sglang, sim, ...)
    show_progress: bool = True
    write_report: bool = True
    processes: int = 1
    scenario_path: str | None = None
    #: `--percentiles`: the console table's columns, read from the HDR histograms (None: the summary's)
    percentiles: tuple[float, ...] | None = None
    #: receives each progress line instead of the terminal (a sweep shows it inside its own)
    progress_sink: Callable[[str], None] | None = None
    labels: dict[str, str] = field(default_factory=dict)  # e.g. sweep config id, for exporters
    kernel_stamps: bool = True
    stop_grace_s: float = 30.0
    distributed: int = 0  # > 0: a Locust master and this many worker processes (harness.load.distributed)
    metrics_port: int | None = None  # serve live harness_ metrics (Prometheus) on this port while running
    metrics_host: str = "127.0.0.1"
    metrics_server: Any = None  # a started exporter.MetricsServer shared across runs (sweeps); wins over the port
    #: reset the target's prefix cache before the run (or salt the prompts where it cannot be
    #: reset); `harness run` turns it on, sweeps reset between cells themselves (harness.prefix_cache)
    reset_prefix_cache: bool = False
    #: called with the latest progress line of every load process; a returned reason stops the run
    #: early (harness.capacity.saturation: an over-saturated trial), recorded in summary.load.stopped_early
    watch: Callable[[list[dict[str, Any]]], str | None] | None = None
    #: the engine's log (a sweep's engine log, `--engine-log FILE`); the embedded simulator's own
    #: sim.log when None. Read over the measured window by harness.diagnose.enginelog
    engine_log: Path | None = None
    #: width of the per-interval figures (timeslices.json, the steady-state check), `--slice-s`
    slice_s: float = 10.0


def run_scenario(scenario: Scenario, opts: RunOptions) -> RunSummary:
    """Measure `scenario` against `opts.target_url` and write the run directory `opts.out_dir`.

    Raises UserError when the target is unusable. Ctrl-C writes what was measured
    (status "partial") before re-raising KeyboardInterrupt.
    """
    run_dir = RunDir(opts.out_dir).create()
    write_text_atomic(run_dir.scenario, dump_scenario(scenario))
    scenario_dir = Path(opts.scenario_path).parent if opts.scenario_path else Path(".")
    tokenizer = load_tokenizer(scenario.workload.tokenizer, scenario_dir)  # fail early on a bad path
    WorkloadGenerator(scenario, tokenizer, scenario_dir)  # and on a bad dataset file
    if scenario.load.trace is not None:  # and on a bad arrival trace
        load_gaps(scenario.load.trace, scenario_dir)
    if scenario.quality is not None:  # and on a bad quality prompts file
        from harness.quality.dataset import load_quality_set

        load_quality_set(scenario.quality.prompts, scenario_dir)
    sim: EmbeddedSim | None = None
    target_url = opts.target_url or scenario.target.url
    engine_kind = opts.engine_kind
    metrics = None
    try:
        if target_url is None:
            sim = EmbeddedSim(opts.sim_args, log_path=run_dir.sim_log).start()
            target_url = sim.url
            engine_kind = engine_kind or "sim"
        info = preflight(target_url, opts.model or scenario.target.model, scenario)
        scenario = _calibrate_tokens(scenario, target_url, info["model"], engine_kind, run_dir, opts)
        scenario, info["prefix_cache_isolation"] = _isolate_prefix_cache(scenario, target_url, opts, run_dir)
        metrics = open_metrics(opts, run_dir.root.name, scenario, info["model"])
        env = metrics.env if metrics is not None else None
        summary = _measure(scenario, opts, run_dir, scenario_dir, target_url, info, engine_kind, tokenizer.id, env, sim)
        if scenario.quality is not None:  # after the measured window: greedy outputs for `harness compare`
            _quality_pass(scenario, scenario_dir, target_url, info["model"], run_dir.root, opts)
        return summary
    finally:
        if metrics is not None:
            metrics.close()
        if sim is not None:
            sim.stop()


def _calibrate_tokens(scenario: Scenario, target_url: str, model: str, engine_kind: str | None, run_dir: RunDir,
                      opts: RunOptions) -> Scenario:
    """No tokenizer given: size the built-in prompts in the target's tokens (its POST /tokenize),
    recorded in workload.token_scale (harness.target.calibrate_tokens says why)."""
    from harness.target import calibrate_tokens

    if scenario.workload.tokenizer is not None or scenario.workload.token_scale is not None or engine_kind == "sim":
        return scenario  # the simulated engine counts built-in words exactly
    scale = calibrate_tokens(target_url, model, scenario)
    if scale is None or abs(scale - 1.0) < 0.02:
        return scenario
    scenario = scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"token_scale": scale})})
    write_text_atomic(run_dir.scenario, dump_scenario(scenario))
    if opts.show_progress:
        print(f"prompt lengths: the target counts {scale:g} tokens per built-in word (POST /tokenize); prompts are "
              "sized in its tokens (workload.token_scale; set workload.tokenizer for exact lengths)", file=sys.stderr)
    return scenario


def _isolate_prefix_cache(scenario: Scenario, target_url: str, opts: RunOptions, run_dir: RunDir):  # type: ignore[no-untyped-def]
    """`opts.reset_prefix_cache`: reset, else salt the prompts (recorded in scenario.yaml)."""
    from harness.prefix_cache import CacheIsolation, isolate
    from harness.target import _auth_headers

    if not opts.reset_prefix_cache:
        return scenario, CacheIsolation("off", salt=scenario.workload.prompt_salt).to_dict()
    scenario, iso = isolate(scenario, target_url, _auth_headers(scenario), reset=True)
    if iso.mode == "salt":
        write_text_atomic(run_dir.scenario, dump_scenario(scenario))
        if opts.show_progress:
            print(f"prefix cache: cannot be reset ({iso.reason}); prompts salted with workload.prompt_salt "
                  f"{iso.salt} (same lengths, other words)", file=sys.stderr)
    return scenario, iso.to_dict()


def _quality_pass(scenario: Scenario, scenario_dir: Path, target_url: str, model: str, root: Path, opts: RunOptions) -> None:
    from harness.quality.passes import quality_pass
    from harness.target import _auth_headers

    assert scenario.quality is not None
    try:
        run = quality_pass(scenario.quality, scenario_dir, target_url, root, model=model, headers=_auth_headers(scenario))
    except Exception as exc:  # the measured results stand without the quality outputs
        print(f"quality pass failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return
    if opts.show_progress:
        errs = f", {run.errors} failed" if run.errors else ""
        print(f"quality: {len(run.outputs)} greedy outputs in {run.seconds:.1f} s{errs} -> {root / 'quality.jsonl'}")


def _measure(
    scenario: Scenario,
    opts: RunOptions,
    run_dir: RunDir,
    scenario_dir: Path,
    target_url: str,
    info: dict[str, Any],
    engine_kind: str | None,
    tokenizer_id: str,
    env: dict[str, str] | None = None,
    sim: EmbeddedSim | None = None,
) -> RunSummary:
    fp = fingerprint(scenario, tokenizer_id, scenario_dir)
    telemetry = _start_telemetry(scenario, target_url, run_dir, engine_kind)
    log_window = _LogMarks(opts.engine_log or (sim.log_path if sim is not None else None), telemetry)
    stall = StallMeter().start()
    processes = max(1, opts.processes)
    procs: list[subprocess.Popen[str]] = []
    helpers: list[subprocess.Popen[str]] = []  # distributed workers: their master speaks for them
    log = open(run_dir.load_log, "a")
    progress = Progress(scenario, enabled=opts.show_progress, live=telemetry.live if telemetry else None,
                        sink=opts.progress_sink)
    follower: _Follower | None = None
    status = "complete"
    stopped_by: BaseException | None = None
    try:
        try:
            # started inside the try: a Ctrl-C (or SIGTERM, which the CLI turns into one) while
            # the processes start still stops the ones already running, in their own sessions
            if opts.distributed:
                processes = opts.distributed
                plan = LoadPlan(
                    scenario=scenario.model_dump(mode="json"), scenario_dir=str(scenario_dir.resolve()),
                    target_url=target_url, model=info["model"], api_key_env=scenario.target.api_key_env,
                    continuous_usage=info["continuous_usage"], out_dir=str(run_dir.root.resolve()), workers=processes,
                    kernel_stamps=opts.kernel_stamps, stop_grace_s=opts.stop_grace_s,
                )
                procs, helpers = _start_distributed(plan, run_dir, log, env)
            else:
                for worker in range(processes):
                    procs.append(_start_load_process(scenario, scenario_dir, target_url, info, run_dir, opts,
                                                     worker, processes, log, env))
            follower = _Follower(procs, progress, log_window, opts.watch, sim)
            follower.wait()
        except KeyboardInterrupt as exc:
            status = "partial"
            stopped_by = exc
            progress.note(f"{stop_reason(exc)}: stopping the load, keeping what was measured ...")
            for p in procs:
                _signal(p, signal.SIGTERM)
            if follower is None:
                follower = _Follower(procs, progress, log_window, opts.watch, sim)
            follower.interrupted = True
            try:
                follower.wait(grace_s=opts.stop_grace_s + 10)
            except KeyboardInterrupt:
                # a second Ctrl-C: stop now. The load processes run in their own sessions, so
                # without this they would keep sending to the target after we exit.
                for p in procs:
                    _signal(p, signal.SIGKILL)
                progress.note("interrupted again: load stopped at once, no summary; "
                              f"{run_dir.requests} keeps the requests recorded so far")
                raise
    finally:
        _stop_helpers(helpers)
        progress.close()
        stall.stop()
        log.close()
    _merge_worker_files(run_dir)
    if any(p.returncode not in (0, None) for p in procs):
        status = "partial" if status == "complete" else status
    results = [json.loads(p.read_text()) for p in run_dir.load_results()]
    if not results and follower is not None and follower.engine_exit is not None:
        raise RunFailed(f"the simulated engine exited (code {follower.engine_exit[0]}) before anything was measured; "
                        f"see {run_dir.sim_log}", *_tail(run_dir.sim_log, 3))
    if not results:
        tail = _tail(run_dir.load_log)
        raise UserError(f"the load process failed before measuring anything; see {run_dir.load_log}", *tail)
    engine: dict[str, Any] = {}
    reconcile: list[str] = []
    if telemetry is not None:
        engine = telemetry.stop()
    summary, metrics = build_summary(
        scenario={"name": scenario.name, "fingerprint": fp, "path": opts.scenario_path, "seed": scenario.seed,
                  "slo_set": scenario.has_slo()},
        target={"url": target_url, "api": scenario.target.api, "model": info["model"], "engine_kind": engine_kind,
                "simulated": engine_kind == "sim", "continuous_usage": info["continuous_usage"], "labels": opts.labels},
        load=load_block(scenario),
        results=results,
        engine=engine,
        stall_meter=stall,
        status=status,
        processes=processes,
    )
    if follower is not None and follower.stopped_early:
        summary.load["stopped_early"] = follower.stopped_early
        summary.validity["warnings"].append(f"stopped early: {follower.stopped_early}")
        summary.validity["ok"] = False
        summary.status = "partial"
    if stopped_by is not None:
        summary.status_reason = stop_reason(stopped_by)
    if follower is not None and follower.engine_exit is not None:
        code, when = follower.engine_exit
        start = summary.window.get("start")
        at = f"at t={when - start:.1f} s of the window" if start and when >= start else "before the window opened"
        summary.status = "failed"
        summary.status_reason = f"the simulated engine exited (code {code}) {at}; see {run_dir.sim_log}"
        summary.validity["warnings"].insert(0, summary.status_reason)
        summary.validity["ok"] = False
    if opts.distributed and len(results) < processes:
        summary.validity["warnings"].append(
            f"only {len(results)} of {processes} workers' final results arrived; the others' requests are missing "
            f"(see {run_dir.load_log})")
        summary.validity["ok"] = False
    summary.prefix_cache_isolation = info.get("prefix_cache_isolation")
    if scenario.load.offline:  # makespan, submit spread, peak in flight; a warning when the client was the limit
        from harness.results.offline import offline_facts

        offline_facts(summary, run_dir.requests, scenario.load.requests or 0)
    if telemetry is not None:
        reconcile = engine_reconcile(summary, engine)
        from harness.prefix_cache import hit_rate_warning, workload_max_hit_rate

        too_warm = hit_rate_warning(engine, workload_max_hit_rate(scenario, expected_prefix_hit_rate(scenario)))
        if too_warm:
            reconcile.append(too_warm)
        if reconcile:
            summary.validity["warnings"].extend(reconcile)
            summary.validity["ok"] = False
    _diagnose(summary, run_dir.root, opts, log_window, engine_kind)
    failed_most = most_failed(summary)
    if failed_most and summary.status == "complete":
        summary.status, summary.status_reason = "failed", failed_most
    write_json_atomic(run_dir.histograms, metrics.to_dict())
    write_json_atomic(run_dir.summary, summary.model_dump(mode="json"))
    if opts.show_progress:
        chosen = None
        if opts.percentiles:
            from harness.results.export import chosen as chosen_percentiles

            chosen = chosen_percentiles(metrics.to_dict(), opts.percentiles)
        print_summary(summary, run_dir.root, chosen=chosen)
    if opts.write_report:
        _write_report(run_dir.root, opts.show_progress)
    if status == "partial" and follower.interrupted:
        raise stopped_by if stopped_by is not None else KeyboardInterrupt()
    return summary


class _LogMarks:
    """Window marks for telemetry and the engine log's byte range, from the one place that sees them."""

    def __init__(self, engine_log: Path | None, telemetry: Any) -> None:
        from harness.diagnose import LogWindow

        self.telemetry = telemetry
        self.log = LogWindow(engine_log)
        self.live = telemetry.live if telemetry is not None else None

    def mark_window_start(self) -> None:
        self.log.mark_start()
        if self.telemetry is not None:
            self.telemetry.mark_window_start()

    def mark_window_end(self) -> None:
        self.log.mark_end()
        if self.telemetry is not None:
            self.telemetry.mark_window_end()


def _diagnose(summary: RunSummary, root: Path, opts: RunOptions, marks: _LogMarks, engine_kind: str | None) -> None:
    """Post-run analyses (harness.diagnose): blocks in summary.diagnosis, ranked findings."""
    from harness.diagnose import DiagnoseOptions, diagnose

    diagnose(summary, root, DiagnoseOptions(slice_s=opts.slice_s, engine_log=marks.log.path,
                                            log_window=marks.log.span, engine_kind=engine_kind))


def _merge_worker_files(run_dir: RunDir) -> None:
    """--processes N: each load process appends to requests.wK.jsonl (progress.wK.jsonl); the run
    directory's contract is one requests.jsonl (and progress.jsonl), so join them."""
    for name in ("requests", "progress"):
        parts = sorted(run_dir.root.glob(f"{name}.w*.jsonl"))
        if not parts:
            continue
        target = run_dir.root / f"{name}.jsonl"
        tmp = target.with_name(target.name + ".tmp")
        with open(tmp, "wb") as out:
            if target.exists():
                out.write(target.read_bytes())
            for part in parts:
                data = part.read_bytes()
                out.write(data if not data or data.endswith(b"\n") else data + b"\n")
        os.replace(tmp, target)
        for part in parts:
            part.unlink()


def _start_load_process(scenario: Scenario, scenario_dir: Path, target_url: str, info: dict[str, Any], run_dir: RunDir,
                        opts: RunOptions, worker: int, workers: int, log: Any,
                        env: dict[str, str] | None) -> subprocess.Popen[str]:
    plan = LoadPlan(
        scenario=scenario.model_dump(mode="json"),
        scenario_dir=str(scenario_dir.resolve()),
        target_url=target_url,
        model=info["model"],
        api_key_env=scenario.target.api_key_env,
        continuous_usage=info["continuous_usage"],
        out_dir=str(run_dir.root.resolve()),
        worker=worker,
        workers=workers,
        kernel_stamps=opts.kernel_stamps,
        stop_grace_s=opts.stop_grace_s,
    )
    plan_path = run_dir.root / (f"load_plan.w{worker}.json" if workers > 1 else "load_plan.json")
    plan_path.write_text(plan.model_dump_json(indent=2))
    return subprocess.Popen(
        [sys.executable, "-m", "harness.load.main", str(plan_path)],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        bufsize=1,
        start_new_session=True,  # Ctrl-C reaches us only; we stop the load gracefully
        preexec_fn=die_with_parent,  # ... and a killed harness (SIGKILL) stops it too
        env=env,  # with live metrics: PROMETHEUS_MULTIPROC_DIR for this run
    )


def load_block(scenario: Scenario) -> dict[str, Any]:
    load = scenario.load
    mode = "offline" if load.offline else "open" if load.open_loop else "closed"
    block: dict[str, Any] = {"mode": mode, "duration_s": load.duration_s, "requests": load.requests, "ramp_s": load.ramp_s}
    if load.offline:  # every request at once: a batch-throughput run (makespan and the client check added after it)
        block["concurrency"] = load.requests
    elif load.open_loop:
        block.update(rate=load.rate, arrival=load.arrival, burstiness=load.burstiness, max_in_flight=load.max_in_flight)
        if load.trace is not None:
            block["trace"] = load.trace.model_dump()
    else:
        block["concurrency"] = load.concurrency
    return block


def _start_telemetry(scenario: Scenario, target_url: str, run_dir: RunDir, engine_kind: str | None):  # type: ignore[no-untyped-def]
    if not scenario.telemetry.enabled:
        return None
    try:
        from harness.telemetry.session import TelemetrySession
    except ImportError:
        return None
    session = TelemetrySession(
        target_url=target_url,
        config=scenario.telemetry,
        out_dir=run_dir.root,
        expected_prefix_hit_rate=expected_prefix_hit_rate(scenario),
        engine_kind=engine_kind,
    )
    session.start()
    return session


def engine_reconcile(summary: RunSummary, engine: dict[str, Any]) -> list[str]:
    try:
        from harness.telemetry.reconcile import reconcile
    except ImportError:
        return []
    client = {k: v.model_dump() for k, v in summary.latency_ms.items()}
    return list(reconcile(client, engine))


def _write_report(root: Path, verbose: bool) -> None:
    try:
        from harness.report import write_report
    except ImportError:
        return
    try:
        path = write_report(root)
        if verbose:
            print(f"report: {path}")
    except Exception as exc:  # noqa: BLE001 - a report failure must never lose the run
        print(f"warning: report not written: {exc}", file=sys.stderr)


def _start_distributed(plan: LoadPlan, run_dir: RunDir, log: Any, env: dict[str, str] | None):  # type: ignore[no-untyped-def]
    """A headless Locust master (it prints the JSON lines a load process prints) and its workers."""
    from harness.target import free_port

    port = free_port()
    plan_path = run_dir.plan
    plan_path.write_text(plan.model_dump_json(indent=2))
    common = {"stderr": log, "text": True, "start_new_session": True, "env": env, "preexec_fn": die_with_parent}
    master = subprocess.Popen(
        [sys.executable, "-m", "harness.load.distributed", "master", str(plan_path), "--expect-workers",
         str(plan.workers), "--port", str(port)],
        stdout=subprocess.PIPE, bufsize=1, **common,
    )
    workers = [
        subprocess.Popen([sys.executable, "-m", "harness.load.distributed", "worker", "--master-port", str(port)],
                         stdout=log, **common)
        for _ in range(plan.workers)
    ]
    return [master], workers


def _stop_helpers(helpers: list[subprocess.Popen[str]], timeout_s: float = 10.0) -> None:
    """Workers quit when their master does; stop any that did not."""
    deadline = time.monotonic() + timeout_s
    for p in helpers:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(p, signal.SIGTERM)
            try:
                p.wait(3)
            except subprocess.TimeoutExpired:
                _signal(p, signal.SIGKILL)


def _signal(proc: subprocess.Popen[str], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, n: int = 8) -> list[str]:
    try:
        return [line.rstrip() for line in path.read_text(errors="replace").splitlines()[-n:]]
    except OSError:
        return []


class _Follower:
    """Reads the load processes' JSON lines; tells telemetry when the window starts and ends."""

    def __init__(self, procs: list[subprocess.Popen[str]], progress: Progress, telemetry: Any,
                 watch: Callable[[list[dict[str, Any]]], str | None] | None = None,
                 engine: EmbeddedSim | None = None) -> None:
        self.procs = procs
        self.watch = watch
        self.stopped_early: str | None = None
        self.engine = engine  # the embedded simulator: its death mid-run stops the load and fails the run
        self.engine_exit: tuple[int, float] | None = None  # (exit code, unix time first seen)
        self.talked: set[int] = set()  # load processes that printed a line (signal handlers installed)
        self.stopped: set[int] = set()
        self.progress = progress
        self.telemetry = telemetry
        self.started = 0
        self.ended = 0
        self.drained = 0
        self.interrupted = False
        self.latest: dict[int, dict[str, Any]] = {}
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
                    if self.started == 1 and self.telemetry is not None:
                        self.telemetry.mark_window_start()
                elif event == "window_end":
                    self.ended += 1
                elif event == "drained":
                    pass
                elif event == "abort":
                    self.progress.note(str(line.get("reason", "stopped early")))
                elif event == "progress":
                    self.latest[worker] = line
                    self.progress.update(list(self.latest.values()))
                    if self.watch is not None and self.stopped_early is None:
                        self._check(list(self.latest.values()))
            if event == "drained" and self._all_drained() and self.telemetry is not None:
                self.telemetry.mark_window_end()

    def _check(self, lines: list[dict[str, Any]]) -> None:
        """Ask the watcher; on a reason, stop the load like SIGTERM does (in-flight requests drain)."""
        try:
            reason = self.watch(lines) if self.watch is not None else None
        except Exception as exc:  # noqa: BLE001 - a watcher bug must not lose the run
            reason, self.watch = None, None
            self.progress.note(f"warning: early-stop watcher failed ({exc}); the run continues")
        if reason:
            self.stopped_early = reason
            self.progress.note(f"stopping early: {reason}")
            for p in self.procs:
                _signal(p, signal.SIGTERM)

    def _watch_engine(self) -> None:
        proc = self.engine.proc if self.engine is not None else None
        if proc is None:
            return
        if self.engine_exit is None:
            if proc.poll() is None:
                return
            self.engine_exit = (proc.returncode, time.time())
            self.progress.note(f"the simulated engine exited (code {proc.returncode}): stopping the load, "
                               f"keeping what was measured; see {self.engine.log_path}")  # type: ignore[union-attr]
        # stop each load process once it has said something (its SIGTERM handler is installed by
        # then; a SIGTERM during its start-up would kill it before it could write anything)
        for i, p in enumerate(self.procs):
            if i in self.talked and i not in self.stopped:
                self.stopped.add(i)
                _signal(p, signal.SIGTERM)

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
                        _signal(p, signal.SIGKILL)
                    self._watch_engine()
                    time.sleep(0.1)
            for t in self._threads:
                t.join(timeout=2)
        except KeyboardInterrupt:
            self.interrupted = True
            raise
