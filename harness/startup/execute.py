"""Run a startup plan: each start in its own process group, to ready, then stopped.

Cold starts get a fresh cache root (the kind's `cache_env`: VLLM_CACHE_ROOT, TorchInductor,
Triton; HF_HOME too with `cold_model`), as `vllm bench startup` does; warm starts reuse the root of
the config's last cold start, whose caches that start has filled. Each start appends to the
config's log (`logs/<config>.log`), and its own lines give its facts and phases. `startup.json` is
rewritten after every start, so a killed run loses at most the start in flight and `--resume`
makes only the missing ones. With a scenario, the config's last start stays up and the scenario
runs on it through the sweep executor's cell run (`steady/` holds that sweep index and the runs).
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness.engines import failure_hint, get_kind
from harness.results.models.facts import StartupFacts
from harness.results.models.startup import Start as StartRecord
from harness.results.startup_phases import engine_init, logged_s, split
from harness.startup.plan import Start, StartupPlan
from harness.startup.results import StartupResults
from harness.sweep.engine_start import engine_cwd, engine_env
from harness.sweep.execute import STOP, SweepExecutor, SweepOptions
from harness.sweep.launcher import EngineProcess, StartupFailed, free_port, wait_port_free


@dataclass
class StartupOptions:
    out_dir: Path
    resume: bool = False
    show_progress: bool = True
    write_report: bool = True
    run_fn: Any = None  # the scenario run (default: the sweep's, i.e. harness' run)
    probe_interval_s: float = 0.1  # the resolution of the time to ready
    port_free_timeout_s: float = 30.0
    stream: TextIO = field(default_factory=lambda: sys.stdout)


class StartupRunner:
    def __init__(self, plan: StartupPlan, opts: StartupOptions) -> None:
        self.plan = plan
        self.opts = opts
        self.spec = plan.spec
        self.kind = get_kind(self.spec.engine.kind)
        self.out = opts.out_dir
        self.results = StartupResults.load(self.out) if opts.resume else StartupResults.new(self.out, plan)
        self._steady: SweepExecutor | None = None

    def _say(self, text: str) -> None:
        if self.opts.show_progress:
            self.opts.stream.write(text + "\n")
            self.opts.stream.flush()

    # ------------------------------------------------------------ top level
    def run(self) -> StartupResults:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "logs").mkdir(exist_ok=True)
        (self.out / "startup.yaml").write_text(self.plan.source.read_text())
        self.results.write()
        STOP.requested = False
        try:
            for config in self.plan.configs:
                self._run_config(config)
        except KeyboardInterrupt:
            self.results.interrupted = True
        finally:
            self.results.write()
        if self.opts.write_report and not self.results.interrupted:
            self._write_report()
        return self.results

    def _write_report(self) -> None:
        from harness.report import write_report_or_say
        from harness.report.startup_view import write_startup_report

        write_report_or_say(write_startup_report, self.out, self._say)  # the measurements stand without it

    def _run_config(self, config: Any) -> None:
        starts = [s for s in self.plan.starts if s.config.id == config.id]
        cell = self.plan.cell(config)
        cache: Path | None = None
        for i, start in enumerate(starts):
            last = i == len(starts) - 1
            done = self.results.start(start.id)
            want_cell = cell is not None and last and not self.results.steady_done(config.id)
            if done is not None and done.status == "ok" and not want_cell:
                cache = Path(done.cache_dir) if done.cache_dir else cache
                continue
            if STOP.requested:
                raise KeyboardInterrupt
            primed = cache is not None and cache.exists()
            if start.kind == "cold" or cache is None or not primed:
                fresh = self.out / "caches" / config.id / start.id.split("__")[-1]
                if fresh.exists():
                    shutil.rmtree(fresh)
                if start.kind == "cold" and cache is not None and cache != fresh and cache.exists():
                    shutil.rmtree(cache, ignore_errors=True)  # only the last cold start's caches are needed
                cache = fresh
            note = (
                None
                if start.kind == "cold" or primed
                else "no cold start filled the caches first (cold: 0): this start began empty"
            )
            self._one_start(start, cache, keep_for=cell if want_cell else None, note=note)

    # ------------------------------------------------------------ one start
    def _env(self, port: int, cache: Path, start: Start) -> dict[str, str]:
        spec = self.spec.engine
        env = engine_env(self.kind, spec, {"port": port, "model": spec.model, "host": spec.host}, start.config.flags)
        for var, sub in self.kind.cache_env.items():
            env[var] = str(cache / sub)
        if self.spec.cold_model and start.kind == "cold":
            env["HF_HOME"] = str(cache / "hf")
        return env

    def _one_start(self, start: Start, cache: Path, keep_for: Any = None, note: str | None = None) -> None:
        spec = self.spec.engine
        port = free_port(spec.host) if spec.port == "auto" else int(spec.port)
        if spec.port != "auto":
            wait_port_free(port, spec.host, self.opts.port_free_timeout_s)
        argv = self.plan.command(start.config, port)
        cache.mkdir(parents=True, exist_ok=True)
        log_rel = f"logs/{start.config.id}.log"
        proc = EngineProcess(
            argv, self.out / log_rel, env=self._env(port, cache, start), cwd=engine_cwd(spec, self.plan.source.parent)
        )
        base_url = f"http://{spec.host}:{port}"
        record: dict[str, Any] = {
            "id": start.id,
            "config_id": start.config.id,
            "kind": start.kind,
            "n": start.n,
            "argv": argv,
            "log": log_rel,
            "cache_dir": str(cache),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
            **({"note": note} if note else {}),
        }
        self._say(f"▶ {start.config.id}: {start.kind} start {start.n}")
        try:
            proc.start(header=f"startup {start.id} ({start.kind}, cache {cache})")
            started = proc.wait_ready(
                lambda: self.kind.probe(base_url, spec),
                timeout=spec.ready_timeout_s,
                interval=self.opts.probe_interval_s,
                failure_hint=failure_hint,
            )
        except StartupFailed as exc:
            facts = StartupFacts.model_validate(self.kind.startup_facts(proc.log_text()) if proc.proc else {})
            proc.stop(spec.stop_timeout_s)
            record.update(
                status="failed",
                reason=exc.reason,
                log_tail=exc.tail,
                facts=facts,
                failed_after_s=None if exc.after_s is None else round(exc.after_s, 3),
            )
            self.results.record(StartRecord.model_validate(record))
            self._say(f"  ✗ did not start: {exc.reason}")
            return
        except KeyboardInterrupt:
            proc.stop(spec.stop_timeout_s)
            raise
        facts = StartupFacts.model_validate(self.kind.startup_facts(started.log_text))
        phases = split(facts, started.startup_s)
        record.update(
            status="ok",
            ready_s=round(started.startup_s, 3),
            facts=facts,
            phases={k: None if v is None else round(v, 3) for k, v in phases.items()},
            logged_s=round(logged_s(facts), 3),
            engine_init_s=engine_init(facts),
        )
        self._say(
            "  ready in {:.2f}s: {}".format(
                started.startup_s, ", ".join(f"{k} {v:.2f}s" for k, v in phases.items() if v is not None)
            )
        )
        try:
            if keep_for is not None:
                self._run_steady(keep_for, proc, base_url, started.startup_s, facts, argv, log_rel, port)
        finally:
            proc.stop(spec.stop_timeout_s)
            if not wait_port_free(port, spec.host, self.opts.port_free_timeout_s):
                self._say(f"  port {port} still busy {self.opts.port_free_timeout_s:g}s after the engine stopped")
            self.results.record(StartRecord.model_validate(record))

    def _run_steady(
        self,
        cell: Any,
        proc: EngineProcess,
        base_url: str,
        startup_s: float,
        facts: StartupFacts,
        argv: list[str],
        log_rel: str,
        port: int,
    ) -> None:
        assert self.plan.sweep_plan is not None
        if self._steady is None:
            self._steady = SweepExecutor(
                self.plan.sweep_plan,
                SweepOptions(
                    out_dir=self.out / "steady",
                    resume=(self.out / "steady" / "index.json").is_file(),
                    show_progress=self.opts.show_progress,
                    write_report=False,
                    run_fn=self.opts.run_fn,
                ),
            )
        self._say(f"  steady state: scenario {cell.scenario.name} on this (warm) engine")
        entry = self._steady.run_cell_on(
            cell, base_url, proc, startup_s, facts, {"argv": argv, "log": f"../{log_rel}", "port": port}
        )
        self.results.record_steady(cell.config.id, entry)


def run_startup(plan: StartupPlan, opts: StartupOptions) -> StartupResults:
    return StartupRunner(plan, opts).run()
