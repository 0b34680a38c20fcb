"""One run's lifecycle as steps: the one driver every front end uses.

    driver = RunDriver(scenario, opts, targets)
    driver.prepare()        start (scenario.yaml, inputs checked), then resolve (the target provided,
                            preflight, prefix cache, fingerprint)
    driver.instrument()     engine telemetry, engine log window, host stall meter
    ... the front end runs the load: harness run starts load processes (harness.run.modes) and
        follows their lines (harness.run.follow); the web UI lets Locust start it and hears the
        workers through its Collector. Either tells the driver:
    driver.window_start()   the measured window opened (telemetry baseline, log mark)
    driver.window_end()     the last in-flight request drained
    driver.finish(results, status=..., processes=...)   summary.json, histograms.json
    driver.report()         report.md / report.html
    driver.quality_pass()   greedy outputs for `harness compare` (scenario.quality)
    driver.close()          stops whatever is still running

`run_scenario` (harness.run.lifecycle: `harness run`, sweeps, capacity) calls them in order
around its load processes; the web UI (harness.ui.session) calls them from Locust's events. What
differs between the two is in RunOptions (quality pass, token calibration, judging, the stall
meter's kind), not in a second copy of the steps.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.metrics.recorder import MetricSet
from harness.metrics.stall_meter import StallMeter, StallMeterProcess
from harness.results.layout import RunDir
from harness.results.schema import RunSummary
from harness.run import finish, prepare
from harness.run.instruments import Instruments
from harness.run.options import RunOptions
from harness.run.prepare import Prepared
from harness.run.provider import Target, TargetProvider
from harness.scenario.models import Scenario


class RunDriver:
    """One run, step by step (module docstring). Steps are called once each, in order."""

    def __init__(self, scenario: Scenario, opts: RunOptions, targets: TargetProvider) -> None:
        self.scenario = scenario
        self.opts = opts
        self.targets = targets
        self.run_dir = RunDir(opts.out_dir)
        self.prep: Prepared | None = None
        self.target: Target | None = None
        self.instruments: Instruments | None = None
        self.engine: dict[str, Any] | None = None  # the engine block, once telemetry stopped

    # ---------------------------------------------------------------- before the load
    def prepare(self) -> Prepared:
        """start, then resolve."""
        self.start()
        return self.resolve()

    def start(self) -> Prepared:
        """Write scenario.yaml and check the inputs: a bad file fails here, before any server is
        started or asked."""
        opts = self.opts
        self.run_dir.create()
        prep = prepare.start(
            self.scenario, self.run_dir, opts.scenario_path, scenario_dir=opts.scenario_dir, check_quality=opts.quality
        )
        prep.labels = opts.labels
        self.prep = prep
        return prep

    def resolve(self) -> Prepared:
        """Provide the target (the built-in simulator when none is given), preflight it, size the
        prompts in its tokens, isolate its prefix cache, fingerprint the work."""
        opts, prep = self.opts, self._prepared()
        self.target = target = self.targets.provide(self.scenario, opts.target_url)
        prep.scenario = target.applied(prep.scenario)  # a fleet of built-in simulators: their endpoints
        prepare.resolve(
            prep,
            target.url,
            opts.model or self.scenario.target.model,
            target.engine_kind,
            reset_prefix_cache=opts.reset_prefix_cache,
            off_reason=opts.reset_off_reason,
            verbose=opts.show_progress,
            calibrate=opts.calibrate,
        )
        return prep

    def instrument(self) -> Instruments:
        """Start what watches the run besides the load: telemetry, the engine log, the stall meter."""
        prep, target = self._prepared(), self.target
        assert target is not None
        stall: Any = (
            StallMeterProcess(self.run_dir.root / "stall_meter.json")
            if self.opts.stall_meter == "process"
            else StallMeter()
        )
        log = self.opts.engine_log or (target.sim.log_path if target.sim is not None else None)
        self.instruments = Instruments(prep, stall, log).start()
        return self.instruments

    # ---------------------------------------------------------------- during the load
    def window_start(self) -> None:
        if self.instruments is not None:
            self.instruments.window_start()

    def window_end(self) -> None:
        if self.instruments is not None:
            self.instruments.window_end()

    # ---------------------------------------------------------------- after the load
    def stop_instruments(self) -> dict[str, Any]:
        """Stop the stall meter and the telemetry (once); returns the engine block."""
        if self.engine is None:
            instruments = self.instruments
            if instruments is not None:
                instruments.stall.stop()
            self.engine = instruments.stop_telemetry() if instruments is not None else {}
        return self.engine

    def summarize(
        self,
        results: list[dict[str, Any]],
        *,
        status: str,
        processes: int,
        load: dict[str, Any] | None = None,
        warnings: list[str] | None = None,
        amend: Callable[[RunSummary], None] | None = None,
    ) -> tuple[RunSummary, MetricSet]:
        """summary.json's contents from the load processes' results, judged (not yet written).

        `amend`: what only the front end knows (an early stop, a dead engine, missing workers),
        added before the checks and analyses every run gets (finish.conclude)."""
        prep, instruments = self._prepared(), self.instruments
        assert instruments is not None
        engine = self.stop_instruments()
        summary, metrics = finish.assemble(
            prep,
            results=results,
            engine=engine,
            stall=instruments.stall,
            status=status,
            processes=processes,
            load=load,
            warnings=warnings,
        )
        if amend is not None:
            amend(summary)
        finish.conclude(prep, summary, engine, instruments, slice_s=self.opts.slice_s, judge=self.opts.judge)
        return summary, metrics

    def write(self, summary: RunSummary, metrics: MetricSet) -> None:
        """summary.json and histograms.json (an OSError is the caller's: a full disk)."""
        finish.write(self._prepared(), summary, metrics)

    def finish(
        self,
        results: list[dict[str, Any]],
        *,
        status: str,
        processes: int,
        load: dict[str, Any] | None = None,
        warnings: list[str] | None = None,
        amend: Callable[[RunSummary], None] | None = None,
    ) -> tuple[RunSummary, MetricSet]:
        """summarize + write."""
        summary, metrics = self.summarize(
            results, status=status, processes=processes, load=load, warnings=warnings, amend=amend
        )
        self.write(summary, metrics)
        return summary, metrics

    def report(self) -> Path:
        """report.md and report.html in the run directory; returns report.html's path. Raises
        what the report raised: the caller decides how to say it (the run stands without it)."""
        from harness.report import write_report

        return write_report(self.run_dir.root)

    def quality_pass(self) -> None:
        """After the measured window: greedy outputs for `harness compare` (scenario.quality).
        A failure is one line on stderr; the measured results stand without it."""
        prep = self._prepared()
        scenario, root = prep.scenario, prep.run_dir.root
        if not self.opts.quality or scenario.quality is None:
            return
        # imported only for a run that has a quality pass: ~0.02 CPU-s of every other run's end
        from harness.quality.passes import quality_pass
        from harness.run.target import _auth_headers

        try:
            run = quality_pass(
                scenario.quality,
                prep.scenario_dir,
                prep.target_url,
                root,
                model=prep.model,
                headers=_auth_headers(scenario),
            )
        except Exception as exc:  # the measured results stand without the quality outputs
            print(f"quality pass failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return
        if self.opts.show_progress:
            errs = f", {run.errors} failed" if run.errors else ""
            print(
                f"quality: {len(run.outputs)} greedy outputs in {run.seconds:.1f} s{errs} -> {root / 'quality.jsonl'}"
            )

    def close(self) -> None:
        """Stop the instruments if the run ended before finish (an error, a quit)."""
        if self.engine is None and self.instruments is not None:
            self.stop_instruments()

    def _prepared(self) -> Prepared:
        if self.prep is None:
            raise RuntimeError("RunDriver.prepare() first")
        return self.prep
