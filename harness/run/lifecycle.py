"""`run_scenario`: one scenario against one target, end to end, for `harness run`, sweeps and capacity.

The run driver's steps (harness.run.driver: prepare with the target provider's server or built-in
simulator, instruments, window marks, finish, report, quality pass) around what only this front
end does: start the load processes (the run mode), follow them through the window (console
progress, early stop, a dying simulator) and print the console table. Ctrl-C stops the load
gracefully and still writes what was measured (status "partial").
"""

from __future__ import annotations

import errno
import json
import signal
import sys
from pathlib import Path

from harness.errors import RunFailed, UserError
from harness.metrics.exporter_server import open_run as open_metrics
from harness.results.console import Progress, print_summary
from harness.results.layout import RunDir
from harness.results.schema import RunSummary
from harness.results.verdict import nothing_completed
from harness.run import prepare
from harness.run.driver import RunDriver
from harness.run.follow import Follower, signal_group, tail
from harness.run.modes import MODES, Started, merge_worker_files, stop_helpers
from harness.run.options import RunOptions
from harness.run.provider import TargetProvider
from harness.run.target import EmbeddedSim, refuses_connections
from harness.scenario.models import Scenario
from harness.signals import stop_reason


def run_scenario(scenario: Scenario, opts: RunOptions) -> RunSummary:
    """Measure `scenario` against `opts.target_url` (None: the scenario's, else the built-in
    simulator) and write the run directory `opts.out_dir`.

    Raises UserError when the target is unusable. Ctrl-C writes what was measured
    (status "partial") before re-raising KeyboardInterrupt.
    """
    with TargetProvider(opts.sim_args, Path(opts.out_dir), opts.engine_kind) as targets:
        driver = RunDriver(scenario, opts, targets)
        metrics = None
        try:
            prep = driver.prepare()
            metrics = open_metrics(opts, prep.run_dir.root.name, prep.scenario, prep.model)
            summary = _measure(driver, metrics.env if metrics is not None else None)
            driver.quality_pass()  # after the measured window: greedy outputs for `harness compare`
            return summary
        finally:
            driver.close()
            if metrics is not None:
                metrics.close()


def _measure(driver: RunDriver, env: dict[str, str] | None) -> RunSummary:
    """Start the load processes (the run mode), follow them through the window, finish the run."""
    opts, prep, sim = driver.opts, driver._prepared(), driver.target.sim if driver.target is not None else None
    watched = sim if sim is not None else opts.engine  # the engine whose death stops the load
    run_dir = prep.run_dir
    instruments = driver.instrument()
    started = Started([], processes=max(1, opts.processes))
    log = open(run_dir.load_log, "a")
    progress = Progress(prep.scenario, enabled=opts.show_progress, live=instruments.live, sink=opts.progress_sink)
    follower: Follower | None = None
    status = "complete"
    stopped_by: BaseException | None = None
    try:
        try:
            # started inside the try: a Ctrl-C (or SIGTERM, which the CLI turns into one) while
            # the processes start still stops the ones already running, in their own sessions
            MODES.get(opts.mode)().start(prep, opts, log, env, started)
            follower = Follower(started.procs, progress, driver, opts.watch, watched)
            follower.wait()
        except KeyboardInterrupt as exc:
            status = "partial"
            stopped_by = exc
            progress.note(f"{stop_reason(exc)}: stopping the load, keeping what was measured ...")
            for p in started.procs:
                signal_group(p, signal.SIGTERM)
            if follower is None:
                follower = Follower(started.procs, progress, driver, opts.watch, watched)
            follower.interrupted = True
            try:
                follower.wait(grace_s=opts.stop_grace_s + 10)
            except KeyboardInterrupt:
                # a second Ctrl-C: stop now. The load processes run in their own sessions, so
                # without this they would keep sending to the target after we exit.
                for p in started.procs:
                    signal_group(p, signal.SIGKILL)
                progress.note(
                    "interrupted again: load stopped at once, no summary; "
                    f"{run_dir.requests} keeps the requests recorded so far"
                )
                raise
    finally:
        stop_helpers(started.helpers)
        progress.close()
        instruments.stall.stop()
        log.close()
    merge_worker_files(run_dir)
    procs = started.procs
    if any(p.returncode not in (0, None) for p in procs):
        status = "partial" if status == "complete" else status
    results = [json.loads(p.read_text()) for p in run_dir.load_results()]
    if follower is not None:
        results += follower.inline_results  # a full disk: sent on stdout instead
    write_error = follower.write_error if follower is not None else None
    if not results and follower is not None and follower.engine_exit is not None and watched is not None:
        raise RunFailed(
            f"{watched.label} exited (code {follower.engine_exit[0]}) before anything was measured; "
            f"see {watched.log_path}",
            *tail(watched.log_path, 3),
        )
    if not results and stopped_by is not None:
        # Ctrl-C / SIGTERM while the load processes were still starting: nothing was measured, and
        # that is the stop's doing, not a load process failure (the CLI prints one line, exit 130)
        raise stopped_by
    if not results and write_error is not None:
        raise RunFailed(write_error)
    if not results:
        raise UserError(
            f"the load process failed before measuring anything; see {run_dir.load_log}", *tail(run_dir.load_log)
        )

    def amend(summary: RunSummary) -> None:
        _note_how_it_ended(summary, follower, stopped_by)
        _failed_though_complete(summary, prep, sim)
        if opts.distributed and len(results) < started.processes:
            summary.validity.warnings.append(
                f"only {len(results)} of {started.processes} workers' final results arrived; the others' requests are "
                f"missing (see {run_dir.load_log})"
            )
            summary.validity.ok = False
        if write_error is not None:
            summary.status, summary.status_reason = "failed", write_error
            summary.validity.warnings.insert(0, write_error)
            summary.validity.ok = False

    summary, metrics = driver.summarize(results, status=status, processes=started.processes, amend=amend)
    try:
        driver.write(summary, metrics)
    except OSError as exc:
        if opts.show_progress:
            print_summary(summary, run_dir.root)  # what was measured, on the console at least
        raise RunFailed(_unwritten(exc, run_dir)) from None
    if opts.show_progress:
        chosen = None
        if opts.percentiles:
            from harness.results.export import chosen as chosen_percentiles

            chosen = chosen_percentiles(metrics.to_dict(), opts.percentiles)
        print_summary(summary, run_dir.root, chosen=chosen)
    if opts.write_report:
        _write_report(driver, opts.show_progress)
    if status == "partial" and follower is not None and follower.interrupted:
        raise stopped_by if stopped_by is not None else KeyboardInterrupt()
    return summary


def _note_how_it_ended(summary: RunSummary, follower: Follower | None, stopped_by: BaseException | None) -> None:
    """An early stop (watcher), a stop signal, a dead watched engine: status and warnings say so."""
    if follower is not None and follower.stopped_early:
        summary.load.stopped_early = follower.stopped_early
        summary.validity.warnings.append(f"stopped early: {follower.stopped_early}")
        summary.validity.ok = False
        summary.status = "partial"
    if stopped_by is not None:
        summary.status_reason = stop_reason(stopped_by)
    engine = follower.engine if follower is not None else None
    if follower is not None and follower.engine_exit is not None and engine is not None:  # set only with one
        code, when = follower.engine_exit
        start = summary.window.start
        at = f"at t={when - start:.1f} s of the window" if start and when >= start else "before the window opened"
        summary.status = "failed"
        summary.status_reason = f"{engine.label} exited (code {code}) {at}; see {engine.log_path}"
        summary.validity.warnings.insert(0, summary.status_reason)
        summary.validity.ok = False


def _failed_though_complete(summary: RunSummary, prep: prepare.Prepared, sim: EmbeddedSim | None) -> None:
    """A run that would read `complete` although no request completed in its window (audit R16:
    summary.json said complete while harness run exited 1), or whose external engine stopped
    accepting connections mid-run (audit R15: 39 done then 14 refused connections ended complete,
    exit 0; a dying simulator is caught by its exit code, an external engine only this way)."""
    if summary.status != "complete":
        return
    reason = None
    if summary.requests.completed == 0:
        reason = nothing_completed(summary)
    elif sim is None and summary.requests.errors_by_kind.get("connect"):
        for url in prep.scenario.target.endpoints or [prep.target_url]:
            why = refuses_connections(url)
            if why is not None:
                reason = (
                    f"the target {url} stopped accepting connections during the run ({why} now; "
                    f"{summary.requests.errors_by_kind['connect']} requests could not connect): did the engine "
                    "die? see its log"
                )
                break
    if reason is not None:
        summary.status, summary.status_reason = "failed", reason
        summary.validity.warnings.insert(0, reason)
        summary.validity.ok = False


def _unwritten(exc: OSError, run_dir: RunDir) -> str:
    """The one line for a summary that could not be written (a full disk, audit R5)."""
    what = "disk full" if exc.errno == errno.ENOSPC else "cannot write the results"
    return (
        f"{what}: {Path(exc.filename or run_dir.summary).name} not written in {run_dir.root} "
        f"({exc.strerror or exc}); the complete request lines are kept in requests.jsonl: free space, then "
        f"harness report {run_dir.root} builds the report from them"
    )


def _write_report(driver: RunDriver, verbose: bool) -> None:
    try:
        path = driver.report()
        if verbose:
            print(f"report: {path}")
    except Exception as exc:  # a report failure must never lose the run
        print(f"warning: report not written: {exc}", file=sys.stderr)


__all__ = ["RunOptions", "run_scenario"]
