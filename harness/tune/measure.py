"""Measure candidate flag sets by running a normal sweep: one sweep directory per step.

Each step hands `Measurer.measure` the full flag sets it wants numbers for (the current best
among them). Flag sets measured before, by this step or an earlier one, at the same load levels
and workload, are reused rather than started again: the incumbent is measured once and carried
from step to step, which is most of what tune saves over a grid. What is new becomes a sweep
file (mode list, one config per flag set, the workload, the expected load and the capacity
levels as `loads`) written into DIR/steps/NN-step/ and walked by the sweep executor, so resume,
run directories, index.json and the sweep report are the sweep's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from harness.results.models.diagnosis import Finding
from harness.results.models.facts import StartupFacts
from harness.results.models.summary import RunSummary
from harness.results.models.sweep import Cell as IndexCell
from harness.results.models.sweep import CellMetricName
from harness.results.read import load_sweep
from harness.results.run_metrics import BY_NAME as RUN
from harness.results.sweep_index import DEFAULT_ATTAINMENT, capacity
from harness.sweep.execute import SweepOptions, run_sweep
from harness.sweep.flags import describe, flag_key
from harness.sweep.plan import _safe_id, build_plan
from harness.sweep.results import read_run_summary
from harness.tune.ledger import Ledger, TuneProgress
from harness.tune.load import TuneSpec

if TYPE_CHECKING:
    from harness.quality.runner import QualityRun


def flags_key(flags: dict[str, Any]) -> str:
    """Flag sets compare by canonical name and JSON value (max_num_seqs == max-num-seqs)."""
    norm = {flag_key(k): v for k, v in flags.items() if v is not None}
    return json.dumps(dict(sorted(norm.items())), sort_keys=True, default=str)


def merged(flags: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    out = {flag_key(k): v for k, v in flags.items()}
    for k, v in change.items():
        out[flag_key(k)] = v
    return {k: v for k, v in out.items()}


def flag_of(flags: dict[str, Any], name: str) -> Any:
    return {flag_key(k): v for k, v in flags.items()}.get(flag_key(name))


@dataclass
class Measurement:
    """One flag set's cells: per scenario and load level, the complete repeats' entries."""

    flags: dict[str, Any]
    config_id: str
    sweep_dir: Path
    entries: list[IndexCell]
    expected_level: str  # e.g. "concurrency=64"
    attainment: float = DEFAULT_ATTAINMENT
    _summaries: dict[str, RunSummary | None] = field(default_factory=dict, repr=False)
    #: entries added later from another sweep (evidence bought: Measurer.measure_more) -> its directory
    _dirs: dict[int, Path] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------ state
    @property
    def complete(self) -> list[IndexCell]:
        return [e for e in self.entries if e.status == "complete"]

    @property
    def started(self) -> bool:
        return any(e.status != "failed" or e.startup_s is not None for e in self.entries)

    @property
    def ok(self) -> bool:
        """Every scenario has a complete cell at the expected load."""
        scen = {e.scenario for e in self.entries}
        return bool(scen) and all(self.at_expected(s) for s in scen)

    @property
    def failure(self) -> str | None:
        bad = [e for e in self.entries if e.status != "complete"]
        return bad[0].reason if bad else None

    def failure_kind(self) -> str:
        """How it failed, in words: the engine did not start, it died during a run (a partial
        cell), or it started and the run failed (a failed run is not a failed start)."""
        bad = [e for e in self.entries if e.status != "complete"]
        if not bad:
            return "no cell ran" if not self.entries else "complete"
        if (bad[0].reason or "").startswith("harness error"):
            return "the harness failed"
        if bad[0].status == "partial":
            why = (bad[0].reason or "").lower()
            return "the engine died during the run" if "exit" in why or "died" in why else "the run did not complete"
        if not any(e.startup_s is not None for e in self.entries):
            return "the engine did not start"
        return "the engine started but the run failed"

    @property
    def log_tail(self) -> list[str]:
        for e in self.entries:
            if e.log_tail:
                return list(e.log_tail)
        return []

    @property
    def facts(self) -> StartupFacts:
        """The engine's startup facts (its first start that logged any)."""
        for e in self.entries:
            if e.startup_facts.model_fields_set:
                return e.startup_facts
        return StartupFacts()

    @property
    def scenarios(self) -> list[str]:
        return list(dict.fromkeys(e.scenario for e in self.entries))

    @property
    def cell_ids(self) -> list[str]:
        return [f"{self.dir_of(e).name}/{e.id}" for e in self.entries]

    def dir_of(self, e: IndexCell) -> Path:
        """The sweep directory an entry lives in: evidence bought later has a sweep of its own."""
        return self._dirs.get(id(e), self.sweep_dir)

    @property
    def runs_per_scenario(self) -> int:
        """Complete runs at the expected load, the fewest over scenarios (repeats + evidence)."""
        return min((len(self.at_expected(s)) for s in self.scenarios), default=0)

    def add(self, other: Measurement) -> None:
        """Another sweep's cells of the same flags (interleaved repeats bought as evidence)."""
        for e in other.entries:
            self.entries.append(e)
            self._dirs[id(e)] = other.sweep_dir
        self._summaries.clear()

    def at_expected(self, scenario: str) -> list[IndexCell]:
        return [e for e in self.complete if e.scenario == scenario and e.load_level == self.expected_level]

    def run_dirs(self, scenario: str) -> list[Path]:
        return [self.dir_of(e) / e.run_dir for e in self.at_expected(scenario) if e.run_dir]

    # ------------------------------------------------------------ numbers
    def metric(self, key: CellMetricName, scenario: str | None = None) -> float | None:
        """A figure of index.json's cell metrics (CellMetrics), mean over repeats at the expected
        load; without `scenario`, the mean over scenarios."""
        scens = [scenario] if scenario else self.scenarios
        per = []
        for s in scens:
            vals = [getattr(e.metrics, key) for e in self.at_expected(s)]
            nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if nums:
                per.append(sum(nums) / len(nums))
        return sum(per) / len(per) if per else None

    def summaries(self, scenario: str) -> list[RunSummary]:
        """The runs' summary.json at the expected load (read once each)."""
        out = []
        for d in self.run_dirs(scenario):
            key = str(d)
            if key not in self._summaries:
                self._summaries[key] = read_run_summary(d)
            found = self._summaries[key]
            if found is not None:
                out.append(found)
        return out

    def summary_value(
        self, get: Callable[[RunSummary], float | int | None], scenario: str | None = None
    ) -> float | None:
        """A figure of the runs' summary.json (a run-level table entry's `get`, or any reader of
        the typed summary), mean over repeats and scenarios."""
        vals = [
            float(v)
            for s in ([scenario] if scenario else self.scenarios)
            for summary in self.summaries(s)
            if (v := get(summary)) is not None
        ]
        return sum(vals) / len(vals) if vals else None

    def findings(self, scenario: str | None = None) -> list[Finding]:
        """The runs' diagnosis findings (harness.diagnose, typed), most severe first, one per id
        (the most severe of the repeats): what a step can act on beside the numbers."""
        best: dict[str, Finding] = {}
        for s in [scenario] if scenario else self.scenarios:
            for summary in self.summaries(s):
                for f in summary.findings:
                    if f.id not in best or f.severity > best[f.id].severity:
                        best[f.id] = f
        return sorted(best.values(), key=lambda f: -f.severity)

    def quality_run(self) -> QualityRun | None:
        """The config's greedy outputs (harness.quality.QualityRun) from its first cell that has
        them, or None (no quality block, or the pass failed)."""
        from harness.quality.runner import read_quality_run

        for e in self.entries:
            if e.run_dir:
                run = read_quality_run(self.dir_of(e) / e.run_dir)
                if run is not None and run.outputs:
                    return run
        return None

    def goodput(self, scenario: str | None = None) -> float | None:
        g = self.metric("goodput_req_per_s", scenario)
        return g if g is not None else self.metric("req_per_s", scenario)

    def capacity(self) -> dict[str, str | None]:
        """Per scenario: the highest load level held within the SLOs (None: not even the first)."""
        out: dict[str, str | None] = {}
        for scenario, rows in capacity(self.complete, self.attainment).items():
            for r in rows:
                out[scenario] = r.held.level if r.held else None
        return out

    def capacity_value(self, scenario: str) -> float:
        level = self.capacity().get(scenario)
        if not level:
            return 0.0
        try:
            return float(level.split("=", 1)[1])
        except (IndexError, ValueError):
            return 0.0

    def row(self) -> dict[str, Any]:
        """The `tried` entry of tune.json."""
        m = self.metric
        return {
            "flags": self.flags,
            "config_id": self.config_id,
            "sweep": self.sweep_dir.name,
            "cells": self.cell_ids,
            "status": "complete" if self.ok else "failed",
            "reason": None if self.ok else self.failure,
            # goodput only (requests/s within every SLO): the plain request rate is req_per_s (a
            # fallback here once let a row's "goodput" be req/s without saying so)
            "goodput_req_per_s": m("goodput_req_per_s"),
            "goodput_fraction": m("goodput_fraction"),
            "req_per_s": m("req_per_s"),
            "capacity": self.capacity() or None,
            "ttft_p50_ms": m("ttft_p50_ms"),
            "ttft_p99_ms": m("ttft_p99_ms"),
            "itl_p50_ms": m("itl_p50_ms"),
            "itl_p99_ms": m("itl_p99_ms"),
            "e2e_p50_ms": m("e2e_p50_ms"),
            "e2e_p99_ms": m("e2e_p99_ms"),
            "output_tok_per_s": m("output_tok_per_s"),
            "input_tok_per_s": m("input_tok_per_s"),
            "kv_usage_max": m("kv_usage_max"),
            "kv_usage_mean": self.summary_value(RUN["kv_usage_mean"].get),
            "preemptions": m("preemptions"),
            "prefix_hit_rate": m("prefix_hit_rate"),
            "spec_acceptance_rate": self.summary_value(RUN["spec_acceptance_rate"].get),
            "spec_mean_acceptance_length": self.summary_value(RUN["spec_mean_acceptance_length"].get),
            "gpu_memory_used_max_bytes": self.summary_value(RUN["gpu_memory_used_max_bytes"].get),
            "kv_cache_tokens": self.facts.kv_cache_tokens,
            "itl_p99_inside_prefill_ms": m("itl_p99_inside_prefill_ms"),
            "recompilations": m("recompilations"),
            "findings": [
                {"id": f.id, "text": f.text, "advice": f.advice, "knobs": f.knobs} for f in self.findings()[:3]
            ],
            "quality": None,
        }


class Measurer:
    def __init__(
        self, spec: TuneSpec, out_dir: Path, ledger: Ledger, show_progress: bool = True, resume: bool = False
    ) -> None:
        self.spec = spec
        self.out = out_dir
        self.ledger = ledger
        self.show_progress = show_progress
        self.resume = resume
        self.cache: dict[str, Measurement] = {}
        load = spec.file.load
        self.levels = load.levels()
        self.expected_level = f"{load.path.rsplit('.', 1)[-1]}={load.value:g}"
        self.sweeps = 0

    def config_id(self, flags: dict[str, Any]) -> str:
        varied = {
            k: v for k, v in flags.items() if flags_key({k: v}) != flags_key({k: flag_of(self.spec.file.base, k)})
        }
        return _safe_id(describe(varied)) if varied else "base"

    def new_starts(self, sets: list[dict[str, Any]]) -> int:
        return len({flags_key(f) for f in sets if flags_key(f) not in self.cache})

    def measure(self, step_dir_name: str, sets: list[dict[str, Any]], label: str) -> list[Measurement]:
        todo: dict[str, dict[str, Any]] = {}
        for f in sets:
            k = flags_key(f)
            if k not in self.cache and k not in todo:
                todo[k] = f
        if todo:
            self._run(step_dir_name, list(todo.values()), label)
        return [self.cache[flags_key(f)] for f in sets]

    def measure_fresh(self, step_dir_name: str, sets: list[dict[str, Any]], label: str) -> list[Measurement]:
        """A new measurement even of flag sets measured before (the final benchmark); the cache
        keeps the earlier one."""
        saved = {flags_key(f): self.cache.pop(flags_key(f)) for f in sets if flags_key(f) in self.cache}
        try:
            self._run(step_dir_name, sets, label)
            return [self.cache[flags_key(f)] for f in sets]
        finally:
            self.fresh = {flags_key(f): self.cache[flags_key(f)] for f in sets if flags_key(f) in self.cache}
            self.cache.update(saved)

    def pending_starts(self, step_dir_name: str, sets: list[dict[str, Any]]) -> int:
        """Engine starts a sweep of `sets` in that directory still needs (a resumed tune finds
        the cells it measured before and starts nothing for them)."""
        index = self.out / "steps" / step_dir_name / "index.json"
        if not index.is_file():
            return len(sets)
        try:
            cells = json.loads(index.read_text()).get("cells", [])
        except (OSError, ValueError):
            return len(sets)
        done = {e.get("config_id") for e in cells if e.get("status") == "complete"}
        return sum(1 for f in sets if self.config_id(f) not in done)

    def measure_more(self, step_dir_name: str, ms: list[Measurement], label: str) -> None:
        """More evidence: every flag set of `ms` measured again, in one sweep in this order
        (interleaved: one start each, back to back), its cells added to the same Measurement
        objects, which the cache holds: a later step sees the repeats too."""
        sets = [m.flags for m in ms]
        saved = {flags_key(f): self.cache.pop(flags_key(f)) for f in sets if flags_key(f) in self.cache}
        try:
            self._run(step_dir_name, sets, label)
            fresh = [self.cache[flags_key(f)] for f in sets]
        finally:
            self.cache.update(saved)
        for m, new in zip(ms, fresh, strict=True):
            m.add(new)

    def _sweep_doc(self, sets: list[dict[str, Any]], name: str) -> dict[str, Any]:
        t = self.spec.file
        engine = t.engine.model_dump(exclude_none=True, exclude_defaults=True)
        engine["kind"] = t.engine.kind
        if t.engine.cwd and not Path(t.engine.cwd).is_absolute():
            engine["cwd"] = str((self.spec.source.parent / t.engine.cwd).resolve())
        ids: list[str] = []
        configs = []
        for f in sets:
            cid = self.config_id(f)
            n = 2
            while cid in ids:
                cid = f"{self.config_id(f)}-{n}"
                n += 1
            ids.append(cid)
            configs.append({"id": cid, "flags": f})
        overrides: dict[str, Any] = {"load.duration_s": t.measure.duration_s}
        if t.slo is not None:
            overrides["slo"] = t.slo.model_dump(exclude_none=True)
        cast = int if t.load.concurrency is not None else float
        quality = None
        if t.quality is not None:  # greedy outputs per config (outside every window); the steps judge them
            prompts = Path(t.quality.prompts)
            quality = {
                **t.quality.model_dump(mode="json", exclude_none=True),
                "prompts": str(prompts if prompts.is_absolute() else (self.spec.source.parent / prompts).resolve()),
                "baseline": configs[0]["id"],
            }
        doc = {
            "name": re.sub(r"[^A-Za-z0-9_.-]", "-", _safe_id(f"{t.name}-{name}"))[:60],
            "description": f"harness tune {t.name}: step {name}",
            "engine": engine,
            "vary": {"mode": "list", "configs": configs},
            "scenarios": [str(p) for p in self.spec.scenarios],
            "overrides": overrides,
            "loads": {t.load.path: [cast(v) for v in self.levels]},
            "slo_attainment": t.slo_attainment,
            "repeats": t.measure.repeats,
            "warmup": {"duration_s": t.measure.warmup_s},
        }
        if quality is not None:
            doc["quality"] = quality
        return doc

    def _run(self, step_dir_name: str, sets: list[dict[str, Any]], label: str) -> None:
        sweep_dir = self.out / "steps" / step_dir_name
        sweep_dir.mkdir(parents=True, exist_ok=True)
        src = sweep_dir / "tune-step.yaml"
        doc = self._sweep_doc(sets, step_dir_name)
        src.write_text(yaml.safe_dump(doc, sort_keys=False))
        plan = build_plan(src)
        resume = (sweep_dir / "index.json").is_file()
        progress = TuneProgress(
            self.ledger, label, len(plan.cells), len(plan.engine_starts()), enabled=self.show_progress
        )
        outcome = run_sweep(
            plan,
            SweepOptions(out_dir=sweep_dir, resume=resume, show_progress=self.show_progress, write_report=True),
            progress,
        )
        if outcome.interrupted:
            raise KeyboardInterrupt
        index = load_sweep(sweep_dir)
        by_config: dict[str, list[IndexCell]] = {}
        for e in index.cells:
            by_config.setdefault(e.config_id, []).append(e)
        for cfg, f in zip(doc["vary"]["configs"], sets, strict=True):
            self.cache[flags_key(f)] = Measurement(
                flags=f,
                config_id=cfg["id"],
                sweep_dir=sweep_dir,
                entries=by_config.get(cfg["id"], []),
                expected_level=self.expected_level,
                attainment=self.spec.file.slo_attainment,
            )
