"""Walk a Plan: per engine start, launch -> ready -> facts -> cells (reset, run) -> stop.

Every cell ends as one index entry (complete / partial / failed) written atomically before the
next begins, so a killed sweep loses at most the cell in flight and `--resume` runs only what
is missing. A config that does not start fails its cells with the reason and the log's last
lines, and the sweep goes on; an engine that dies mid-run marks that cell partial, and the next
start is a clean one (the whole process group is gone and the port is free).
"""

from __future__ import annotations

import functools
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.engines import failure_hint, get_kind
from harness.errors import UserError
from harness.results.engine_facts import max_len_warning
from harness.results.models.facts import StartupFacts
from harness.results.models.sweep import Cell as IndexCell
from harness.scenario.loader import format_validation_error
from harness.scenario.models import Scenario
from harness.sweep.cell import cell_entry, cell_run_options, cell_scenario
from harness.sweep.engine_start import ENGINE_RECORD, build_engine, note_engine, stop_recorded_engine
from harness.sweep.launcher import (
    AttachedEngine,
    EngineProcess,
    FleetEngines,
    GpuMemory,
    StartupFailed,
    free_port,
    port_is_free,
    wait_port_free,
)
from harness.sweep.plan import Cell, Config, Plan
from harness.sweep.progress import Clock, Progress
from harness.sweep.quality_step import SweepQuality
from harness.sweep.results import SweepIndex, ranking_table, read_run_summary

RunFn = Callable[[Scenario, Any], Any]


class StopRequest:
    """Set by the CLI's signal handlers (Ctrl-C, SIGTERM, SIGHUP) before they raise
    KeyboardInterrupt, so a stop that the run machinery turned into an error still ends the sweep."""

    def __init__(self) -> None:
        self.requested = False
        self.signal_name = "Ctrl-C"  # what stopped it, for the cell's reason

    def request(self, signal_name: str = "Ctrl-C") -> None:
        self.requested = True
        self.signal_name = signal_name


STOP = StopRequest()


@dataclass
class SweepOptions:
    out_dir: Path
    resume: bool = False
    show_progress: bool = True
    write_report: bool = True
    run_fn: RunFn | None = None  # default: harness.run.lifecycle.run_scenario (looked up at call time)
    probe_interval_s: float = 0.5
    port_free_timeout_s: float = 30.0
    metrics_server: Any = None  # a started harness.metrics.exporter_server.MetricsServer: live metrics across cells
    #: called with (config, base URL, its first complete cell) while the config's engine is still up,
    #: after its cells and quality pass: `harness sweep --capacity-search` searches the capacity
    #: there (harness.capacity sits beside this layer, so the CLI above both wires it in)
    after_config: Callable[[Config, str, Cell], None] | None = None


@dataclass
class SweepOutcome:
    out_dir: Path
    counts: dict[str, int]
    table: str
    interrupted: bool = False


def _default_run(scenario: Scenario, opts: Any) -> Any:
    from harness.run import lifecycle

    return lifecycle.run_scenario(scenario, opts)


class SweepExecutor:
    def __init__(self, plan: Plan, opts: SweepOptions, progress: Progress | None = None) -> None:
        self.plan = plan
        self.opts = opts
        self.sweep = plan.sweep
        self.kind = get_kind(self.sweep.engine.kind)
        self.out = opts.out_dir
        self.index = (
            SweepIndex.load(self.out, self.sweep.name, str(plan.source))
            if opts.resume
            else SweepIndex(self.out, self.sweep.name, str(plan.source))
        )
        self.index.order = [c.id for c in plan.cells]
        self.index.slo_attainment = self.sweep.slo_attainment
        starts = plan.engine_starts()
        self.progress = progress or Progress(len(plan.cells), len(starts), enabled=opts.show_progress)
        self.run_fn: RunFn = opts.run_fn or _default_run
        self.gpu = GpuMemory()
        self.gpu_baseline = self.gpu.used()
        self._reset_warned = False
        self._current: EngineProcess | FleetEngines | None = None
        self.quality = SweepQuality.of(plan)  # a bad prompts file fails here, before any start

    # ------------------------------------------------------------ top level
    def run(self) -> SweepOutcome:
        clock = Clock()
        self._recorded: set[str] = set()  # cells written by this run
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "logs").mkdir(exist_ok=True)
        self._write_sweep_copy()
        self._stop_leftover()
        todo = [
            (config, [c for c in cells if not self.index.is_complete(c.id)])
            for config, cells in self.plan.engine_starts()
        ]
        skipped = len(self.plan.cells) - sum(len(cells) for _, cells in todo)
        todo = [(config, cells) for config, cells in todo if cells]
        self.progress.total_starts = len(todo)
        self.progress.estimate_cell_s = self._estimate_cell_s()
        self.progress.planned = {c.id: self._planned_s(c) for _, cells in todo for c in cells}
        self.progress.skipped(skipped)
        self.index.write()
        interrupted = False
        STOP.requested = False
        try:
            for config, cells in todo:
                if STOP.requested:
                    raise KeyboardInterrupt
                try:
                    self._run_start(config, cells)
                except Exception as exc:  # a harness bug must not end an overnight sweep
                    self._start_crashed(cells, exc)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            if self._current is not None:
                self._stop(self._current)
                self._current = None
            self.index.write()
        entries = self.index.ordered()
        planned = [self.index.entries[c.id] for c in self.plan.cells if c.id in self.index.entries]
        counts = {s: sum(1 for e in planned if e.status == s) for s in ("complete", "partial", "failed")}
        counts["not run"] = len(self.plan.cells) - len(planned)
        if self.quality is not None:
            self._score_quality()
            entries = self.index.ordered()
        table = ranking_table(entries, self.sweep.slo_attainment) if entries else ""
        if not interrupted:
            self.progress.finished(clock.elapsed(), counts)
            if self.opts.write_report:
                self._write_report()
        return SweepOutcome(self.out, counts, table, interrupted)

    def _planned_s(self, cell: Cell) -> float | None:
        """Seconds of load a cell is planned to take (warmup + window); None for a request count."""
        load = cell.resolved.load
        return load.duration_s + cell.resolved.warmup.duration_s if load.duration_s else None

    def _estimate_cell_s(self) -> float | None:
        durations = []
        for cell in self.plan.cells:
            load = cell.resolved.load
            if load.duration_s:
                durations.append(load.duration_s + cell.resolved.warmup.duration_s)
        return sum(durations) / len(durations) if durations else None

    def _write_sweep_copy(self) -> None:
        target = self.out / "sweep.yaml"
        text = self.plan.source.read_text()
        if target.exists() and target.read_text() != text:
            self.progress.note(f"{self.plan.source} changed since {target} was written; cells are matched by id")
            target.with_name("sweep.previous.yaml").write_text(target.read_text())
        target.write_text(text)

    def _write_report(self) -> None:
        from harness.report import write_report, write_report_or_say

        write_report_or_say(write_report, self.out, self.progress.note)  # the sweep's results stand without it

    # ------------------------------------------------------------ one engine start
    def _run_start(self, config: Config, cells: list[Cell]) -> None:
        spec = self.sweep.engine
        attached = not self.kind.starts_engine
        port = None if attached else free_port(spec.host) if spec.port == "auto" else int(spec.port)
        argv = [] if attached else self.plan.command(config, port)
        base_url = str(spec.url).rstrip("/") if attached else f"http://{spec.host}:{port}"  # external: url validated
        log_rel = f"logs/{config.id}.log"
        self.progress.engine_starting(config.id, config.varied, argv, len(cells))
        common: dict[str, Any] = {"argv": argv, "log": None if attached else log_rel, "port": port}
        if attached:
            common["url"] = base_url

        if (
            port is not None
            and spec.port != "auto"
            and not port_is_free(port, spec.host)
            and not wait_port_free(port, spec.host, self.opts.port_free_timeout_s)
        ):
            reason = f"port {port} is still in use by another process; free it or use port: auto"
            self.progress.engine_failed(reason, [])
            for cell in cells:
                self._record(cell, "failed", reason=reason, extra=common)
            return

        launch = build_engine(self.plan, self.kind, config, self.out, port, argv, base_url)
        proc = launch.proc
        self._fleet_urls = launch.urls
        common.update(launch.extra)
        self._current = proc
        try:
            proc.start(header=f"config {config.id}")
            note_engine(self.out, proc)
            wait: dict[str, Any] = dict(
                interval=self.opts.probe_interval_s,
                failure_hint=failure_hint,
                on_wait=lambda t, p: self.progress.waiting(t, p.detail),
            )
            if isinstance(proc, FleetEngines):
                probes = [functools.partial(self.kind.probe, u, spec) for u in self._fleet_urls]
                started = proc.wait_ready(probes, spec.ready_timeout_s, **wait)
            else:
                started = proc.wait_ready(lambda: self.kind.probe(base_url, spec), spec.ready_timeout_s, **wait)
        except StartupFailed as exc:
            facts = StartupFacts.model_validate(self.kind.startup_facts(proc.log_text()) if proc.proc else {})
            self._stop(proc)
            self.progress.engine_failed(exc.reason, exc.tail)
            for cell in cells:
                extra = {
                    **common,
                    "log_tail": exc.tail,
                    "failed_after_s": None if exc.after_s is None else round(exc.after_s, 3),
                }
                self._record(cell, "failed", reason=exc.reason, startup_facts=facts, extra=extra)
            return

        facts = StartupFacts.model_validate(self.kind.startup_facts(started.log_text))
        for cell in cells:  # auto-fit may have left less context than the workload asks for
            warning = max_len_warning(facts, cell.resolved, cell.scenario.name)
            if warning and facts.max_model_len_warning is None:
                facts.max_model_len_warning = warning
        self.progress.engine_ready(started.startup_s, facts)
        startup: dict[str, Any] = {"startup_s": round(started.startup_s, 3), "startup_facts": facts}
        died_in: str | None = None
        for i, cell in enumerate(cells):
            code = proc.poll()
            if code is not None:
                why = f"engine exited with code {code}" + (
                    f" during cell {died_in}" if died_in else " before this cell"
                )
                self._record(cell, "failed", reason=why, extra={**common, "log_tail": proc.tail()}, **startup)
                continue
            notes = []
            if i > 0 and self.sweep.reset_prefix_cache_between:
                problem = next(filter(None, (self.kind.reset_prefix_cache(u, spec) for u in self._fleet_urls)), None)
                if problem:
                    notes.append(f"prefix cache not reset: {problem}")
                    if not self._reset_warned:
                        self.progress.note(f"prefix cache not reset between cells: {problem}")
                        self._reset_warned = True
            if self._run_cell(cell, i, base_url, proc, startup, {**common, "notes": notes}) == "engine-died":
                died_in = cell.id
            elif self.quality is not None and not self.quality.has_outputs(self.out, config) and proc.poll() is None:
                self._quality_pass(cell, base_url)
        if self.opts.after_config is not None and proc.poll() is None:
            done = [c for c in cells if (e := self.index.entries.get(c.id)) is not None and e.status == "complete"]
            if done:
                try:
                    self.opts.after_config(config, base_url, done[0])
                except KeyboardInterrupt:
                    raise
                except Exception as exc:  # the sweep's results stand without it
                    self.progress.note(f"after {config.id}: {type(exc).__name__}: {exc}")
        self._stop(proc)

    # ------------------------------------------------------------ quality (outside every window)
    def _quality_pass(self, cell: Cell, base_url: str) -> None:
        assert self.quality is not None
        try:
            run = self.quality.run_pass(self.out, cell, base_url, self.sweep.engine.served_model_name)
        except Exception as exc:  # the speed results stand without the quality outputs
            self.progress.note(f"quality pass of {cell.config.id} failed: {type(exc).__name__}: {exc}")
            return
        errs = f", {run.errors} failed" if run.errors else ""
        self.progress.note(
            f"quality {cell.config.id}: {len(run.outputs)} prompts in {run.seconds:.1f} s{errs} -> {cell.run_dir}/quality.jsonl"
        )

    def _score_quality(self) -> None:
        assert self.quality is not None
        try:
            verdicts = self.quality.score(self.out, self.index.entries)
        except Exception as exc:
            self.progress.note(f"quality not scored: {type(exc).__name__}: {exc}")
            return
        for cid, v in verdicts.items():
            if v["status"] in ("fail", "engine-problem"):
                self.progress.note(f"quality gate: {cid} {v['status']}: " + "; ".join(v["reasons"]))
        self.index.write()

    def _start_crashed(self, cells: list[Cell], exc: Exception) -> None:
        if self._current is not None:
            self._stop(self._current)
        reason = f"harness error: {type(exc).__name__}: {exc}"
        self.progress.note(reason)
        for cell in cells:
            if cell.id not in self._recorded:
                self._record(cell, "failed", reason=reason)

    def _stop_leftover(self) -> None:
        pgid = stop_recorded_engine(self.out)
        if pgid is not None:
            self.progress.note(f"stopped an engine left running by the interrupted sweep (process group {pgid})")

    def _stop(self, proc: EngineProcess | FleetEngines) -> None:
        spec = self.sweep.engine
        proc.stop(spec.stop_timeout_s)
        (self.out / ENGINE_RECORD).unlink(missing_ok=True)
        if self._current is proc:
            self._current = None
        port = getattr(proc, "port", None)
        if port is not None and not wait_port_free(port, spec.host, self.opts.port_free_timeout_s):
            self.progress.note(f"port {port} still busy {self.opts.port_free_timeout_s:g}s after the engine stopped")
        if self.gpu.available and not isinstance(proc, AttachedEngine):
            ok, used = self.gpu.wait_released(self.gpu_baseline, spec.gpu_release_timeout_s)
            if not ok:
                self.progress.note(
                    f"GPU memory not released after {spec.gpu_release_timeout_s:g}s: used {used}, before {self.gpu_baseline}"
                )

    # ------------------------------------------------------------ one cell
    def _scenario_for(self, cell: Cell, first_after_start: bool) -> Scenario:
        return cell_scenario(cell, self.sweep, getattr(self, "_fleet_urls", []), first_after_start)

    def run_cell_on(
        self,
        cell: Cell,
        base_url: str,
        proc: EngineProcess,
        startup_s: float,
        facts: StartupFacts,
        extra: dict[str, Any],
    ) -> IndexCell:
        """Run one planned cell on an engine another driver started and will stop (`harness
        startup` measures its scenario on the last warm start); returns the cell's index entry."""
        if not hasattr(self, "_recorded"):
            self._recorded = set()
        self.out.mkdir(parents=True, exist_ok=True)
        self._run_cell(cell, 0, base_url, proc, {"startup_s": round(startup_s, 3), "startup_facts": facts}, extra)
        self.index.write()
        return self.index.entries[cell.id]

    def _run_cell(
        self,
        cell: Cell,
        i: int,
        base_url: str,
        proc: EngineProcess | FleetEngines,
        startup: dict[str, Any],
        extra: dict[str, Any],
    ) -> str:
        run_dir = self.out / cell.run_dir
        if run_dir.exists():
            shutil.rmtree(run_dir)  # an earlier, unfinished attempt of this cell
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        opts = cell_run_options(
            cell,
            self.sweep,
            self.kind,
            run_dir,
            base_url,
            self.opts.metrics_server,
            self.progress.cell_progress,
            (self.out / extra["log"]) if extra.get("log") else None,
            proc if isinstance(proc, EngineProcess) else None,  # a fleet's replicas: the executor checks them
        )
        self.progress.cell_starting(cell.id, cell.what, cell.repeat)
        t0 = time.monotonic()
        started = time.strftime("%Y-%m-%dT%H:%M:%S")
        status, reason = "complete", None
        try:
            result = self.run_fn(self._scenario_for(cell, i == 0), opts)
            status = getattr(result, "status", None) or "complete"
        except KeyboardInterrupt:
            self._record(
                cell,
                "partial",
                reason=f"interrupted ({STOP.signal_name if STOP.requested else 'Ctrl-C'})",
                extra={**extra, "started": started},
                **startup,
            )
            raise
        except UserError as exc:
            status, reason = "failed", "; ".join(exc.lines)
        except ValidationError as exc:  # the cell's scenario with the sweep's settings: one line, not pydantic's text
            status, reason = "failed", "; ".join(format_validation_error(f"cell {cell.id}", exc))
        except Exception as exc:  # one broken cell must not end an overnight sweep
            status, reason = "failed", f"{type(exc).__name__}: {exc}"
        wall = time.monotonic() - t0
        if STOP.requested:  # interrupted, though the run reported something else
            self._record(
                cell,
                "partial",
                reason=f"interrupted ({STOP.signal_name})",
                extra={**extra, "started": started, "duration_s": round(wall, 3)},
                **startup,
            )
            raise KeyboardInterrupt
        outcome = "ok"
        code = proc.poll()
        if code is None and status != "complete":
            code = proc.wait_exit(2.0)  # a run that went wrong: is the engine on its way out?
        if code is not None:
            hint = failure_hint(proc.log_text())
            reason = f"engine exited with code {code} during the run" + (f": {hint}" if hint else "")
            status = "partial" if read_run_summary(run_dir) is not None else "failed"
            extra = {**extra, "log_tail": proc.tail()}
            outcome = "engine-died"
        elif status not in ("complete", "partial", "failed"):
            status = "partial"
        entry = self._record(
            cell, status, reason=reason, extra={**extra, "started": started, "duration_s": round(wall, 3)}, **startup
        )
        self.progress.cell_done(entry, wall)
        return outcome

    def _record(
        self,
        cell: Cell,
        status: str,
        reason: str | None = None,
        startup_s: float | None = None,
        startup_facts: StartupFacts | None = None,
        extra: dict[str, Any] | None = None,
    ) -> IndexCell:
        entry = cell_entry(
            cell, status, reason, startup_s, startup_facts, extra, read_run_summary(self.out / cell.run_dir)
        )
        self.index.record(entry)
        self._recorded.add(cell.id)
        if status == "failed" and entry.duration_s is None:
            self.progress.cell_done(entry, None)
        return entry


def run_sweep(plan: Plan, opts: SweepOptions, progress: Progress | None = None) -> SweepOutcome:
    return SweepExecutor(plan, opts, progress).run()
