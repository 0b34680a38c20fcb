"""A sweep seen as configs × scenarios: repeats averaged, configs ranked per scenario.

Ranking is on goodput (requests per second that met every SLO), the guides' criterion for
"best config"; ties go to the lower E2E p99. A speculating config below 50% acceptance is shown
after the ranked ones and never chosen (guide 001: below 50% acceptance speculation hurts). A sweep whose runs carry no goodput (no SLO set)
is ranked on requests/s and says so.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.compare.metrics import METRICS, MetricDef
from harness.report.data import RunData
from harness.report.figures import SweepPoint
from harness.report.sweep_data import Cell, SweepData
from harness.results.run_metrics import BY_NAME as RUN
from harness.results.sweep_index import low_acceptance
from harness.results.verdict import failure_reason


@dataclass
class ConfigResult:
    config: str
    scenario: str  # with the load level, when the sweep has one
    flags: dict[str, Any]
    cells: list[Cell] = field(default_factory=list)

    @property
    def group(self) -> str:
        """The scenario file: the figure column where this config's load levels form one curve."""
        return self.cells[0].base_scenario or self.scenario if self.cells else self.scenario

    @property
    def level(self) -> str | None:
        return self.cells[0].load_level if self.cells else None

    @property
    def runs(self) -> list[RunData]:
        return [c.run for c in self.cells if c.usable and c.run is not None]

    @property
    def status(self) -> str:
        if self.runs:
            return "complete" if all(c.status == "complete" for c in self.cells) else "partial"
        if any(c.status == "failed" for c in self.cells):
            return "failed"
        return "missing"

    @property
    def reason(self) -> str | None:
        for c in self.cells:
            if c.reason:
                return str(c.reason)
        for c in self.cells:  # an index written before every failed cell carried a reason (audit N12)
            if c.run is not None and (why := failure_reason(c.run.summary)):
                return why
        return None

    @property
    def load(self) -> str | None:
        """The client load its runs carried ('32 users', '4 req/s'); with vary.link it differs
        between configs, and configs at different loads are not one comparison."""
        for r in self.runs:
            load = r.summary.load
            if load.concurrency is not None:
                return f"{load.concurrency:g} users"
            if load.rate is not None:
                return f"{load.rate:g} req/s"
        return None

    @property
    def devices(self) -> int | None:
        """Devices (GPUs) the config used: replicas x tensor parallelism (sweep index `devices`)."""
        for c in self.cells:
            d = c.entry.devices if c.entry is not None else None
            if d is not None and d > 0:
                return d
        return None

    @property
    def replicas(self) -> int:
        return next((c.entry.replicas for c in self.cells if c.entry is not None and c.entry.replicas is not None), 1)

    @property
    def gpu_memory_gib(self) -> float | None:
        """NVML's peak GPU memory used, mean over the repeats."""
        vals = [v for r in self.runs if (v := RUN["gpu_memory_used_max_gib"].get(r.summary)) is not None]
        return float(np.mean(vals)) if vals else None

    def spec(self, figure: str) -> float | None:
        """Mean over the repeats of a speculative-decoding figure of the run-level table
        (spec_acceptance_rate, spec_mean_acceptance_length); None when the config does not speculate."""
        vals = [v for r in self.runs if (v := RUN[figure].get(r.summary)) is not None]
        return float(np.mean(vals)) if vals else None

    @property
    def unranked(self) -> str | None:
        """Why it is shown but not ranked: speculation below 50% acceptance (guide 001)."""
        return low_acceptance(self.spec("spec_acceptance_rate"))

    def value(self, metric: MetricDef | str) -> float | None:
        m = METRICS[metric] if isinstance(metric, str) else metric
        vals = [v for v in (m.get(r.summary) for r in self.runs) if v is not None]
        return float(np.mean(vals)) if vals else None

    def spread(self, metric: MetricDef | str) -> float | None:
        m = METRICS[metric] if isinstance(metric, str) else metric
        vals = [v for v in (m.get(r.summary) for r in self.runs) if v is not None]
        return float(max(vals) - min(vals)) if len(vals) > 1 else None


def results(sweep: SweepData) -> dict[tuple[str, str], ConfigResult]:
    out: dict[tuple[str, str], ConfigResult] = {}
    for cell in sweep.cells:
        key = (cell.config_id, cell.scenario)
        if key not in out:
            out[key] = ConfigResult(cell.config_id, cell.scenario, sweep.flags_of(cell.config_id))
        out[key].cells.append(cell)
    return out


def rank_metric(sweep_results: dict[tuple[str, str], ConfigResult]) -> MetricDef:
    has_goodput = any(r.value("goodput_rps") is not None for r in sweep_results.values())
    return METRICS["goodput_rps" if has_goodput else "rps"]


def ranking(sweep: SweepData) -> tuple[dict[str, list[ConfigResult]], MetricDef]:
    """Per scenario, configs best first (unusable ones last, in sweep order)."""
    res = results(sweep)
    key_metric = rank_metric(res)
    out: dict[str, list[ConfigResult]] = {}
    for scenario in sweep.scenarios:
        rows = [res[(c, scenario)] for c in sweep.configs if (c, scenario) in res]
        usable = [r for r in rows if r.runs and not r.unranked]
        usable.sort(key=lambda r: (-(r.value(key_metric) or 0.0), r.value("e2e.p99") or float("inf")))
        out[scenario] = usable + [r for r in rows if r.runs and r.unranked] + [r for r in rows if not r.runs]
    return out, key_metric


def mixed_loads(rows: list[ConfigResult]) -> list[str]:
    """The distinct client loads of a scenario's configs, when there is more than one."""
    loads = list(dict.fromkeys(r.load for r in rows if r.runs and r.load))
    return loads if len(loads) > 1 else []


def best_configs(ranked: dict[str, list[ConfigResult]], key_metric: MetricDef) -> dict[str, str | None]:
    """The top config per scenario; none where the configs ran at different client loads."""
    out: dict[str, str | None] = {}
    for scenario, rows in ranked.items():
        top = (
            rows[0]
            if rows
            and rows[0].runs
            and not rows[0].unranked
            and (rows[0].value(key_metric) or 0) > 0
            and not mixed_loads(rows)
            else None
        )
        out[scenario] = top.config if top else None
    return out


def points(sweep: SweepData) -> list[SweepPoint]:
    out: list[SweepPoint] = []
    for r in results(sweep).values():
        if not r.runs:
            continue
        frac = r.value("goodput_pct")
        out.append(
            SweepPoint(
                config=r.config,
                scenario=r.scenario,
                throughput=r.value("output_tps") or 0.0,
                lat={m: (r.value(f"{m}.p50"), r.value(f"{m}.p99")) for m in ("ttft", "itl", "e2e")},
                goodput_rps=r.value("goodput_rps") if r.value("goodput_rps") is not None else r.value("rps"),
                goodput_fraction=None if frac is None else frac / 100.0,
                repeats=len(r.runs),
                group=r.group,
                level=r.level,
            )
        )
    return out


def failed_configs(sweep: SweepData) -> dict[str, str]:
    """Configs none of whose cells produced results, with the first reason recorded."""
    out: dict[str, str] = {}
    res = results(sweep)
    for cfg in sweep.configs:
        rows = [r for (c, _), r in res.items() if c == cfg]
        if rows and not any(r.runs for r in rows):
            out[cfg] = next((r.reason for r in rows if r.reason), None) or (
                f"{rows[0].status}, no reason recorded; see its cells' run directories and the engine log in logs/"
            )
    return out


def flags_text(flags: dict[str, Any]) -> str:
    """The flags as a shell command spells them, so they paste into one: False is --no-x (as
    harness.sweep.flags renders the engine's argv), a JSON-valued flag is compact JSON in single
    quotes (audit N10: `--speculative-config {'method': 'ngram', ...}`, a Python dict)."""
    if not flags:
        return "(base)"
    parts = []
    for k, v in flags.items():
        name = k if str(k).startswith("-") else f"--{k}"
        if v is True:
            parts.append(name)
        elif v is False:
            parts.append(f"--no-{name.lstrip('-')}")
        else:
            text = json.dumps(v, separators=(",", ":")) if isinstance(v, (dict, list)) else str(v)
            parts.append(f"{name} {shlex.quote(text)}")
    return " ".join(parts)
