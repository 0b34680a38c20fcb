"""The sweep directory's index: `index.json` (one entry per cell), `summary.csv`, the ranking.

Both files are rewritten whole after every cell, through a temporary file and os.replace, so a
killed sweep leaves either the previous or the new version, never half of one.

index.json = {"sweep", "sweep_file", "created", "updated", "cells": [entry, ...]} where entry has
the keys the report reads: id, config_id, flags, scenario, repeat, status, run_dir (relative to
the sweep dir), startup_s, startup_facts, reason; plus varied, argv, log, log_tail, metrics,
started, finished, duration_s, overrides, notes, port, failed_after_s (a failed start: seconds from
launch to the failure).
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UserError
from harness.results.engine_facts import facts_lines
from harness.results.models import FILES
from harness.results.models.summary import RunSummary
from harness.results.models.sweep import Cell, CellMetrics, CellQuality
from harness.results.models.sweep import SweepIndex as IndexFile
from harness.results.read import load_run, load_sweep
from harness.results.run_metrics import LATENCY_COLUMNS, SWEEP_STATS, sweep_metrics, used_in
from harness.results.sweep_index import DEFAULT_ATTAINMENT, capacity, cell_label, low_acceptance, top_level
from harness.sweep.flags import describe

__all__ = ["LATENCY_COLUMNS", "METRIC_COLUMNS", "SWEEP_STATS", "SweepIndex", "read_run_summary", "run_metrics"]

#: summary.csv's figure columns: the latency columns, then the run-level table's "csv" entries
METRIC_COLUMNS = (*LATENCY_COLUMNS, *(m.name for m in used_in("csv")))
FACT_COLUMNS = ("kv_cache_tokens", "max_concurrency", "model_load_s", "graph_capture_s", "init_engine_s")
#: index.json's cell metrics of a run (harness.results.run_metrics)
run_metrics = sweep_metrics


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:  # a full disk: no half-written temp file left behind, the error names the file
        tmp.unlink(missing_ok=True)
        exc.filename = str(path)
        raise
    os.replace(tmp, path)


def load_text(m: CellMetrics) -> str | None:
    """A cell's client load in words: '32 users' (closed loop) or '4 req/s' (open loop)."""
    if m.client_concurrency is not None:
        return f"{m.client_concurrency:g} users"
    if m.client_rate is not None:
        return f"{m.client_rate:g} req/s"
    return None


def mixed_loads(rows: list[RankRow]) -> list[str]:
    """The distinct client loads of a scenario's configs when there is more than one (vary.link):
    their goodput is then not one comparison and they are not ranked."""
    loads = list(dict.fromkeys(r.load for r in rows if r.complete and r.load))
    return loads if len(loads) > 1 else []


def read_run_summary(run_dir: Path) -> RunSummary | None:
    """A cell's summary.json, or None when it has none (or one this harness cannot read)."""
    try:
        return load_run(run_dir)
    except UserError:
        return None


# ---------------------------------------------------------------- the index
class SweepIndex:
    """The executor's index.json: typed cells (harness.results.models.sweep), rewritten whole."""

    def __init__(self, out_dir: Path, sweep_name: str, sweep_file: str) -> None:
        self.out_dir = out_dir
        self.path = out_dir / "index.json"
        self.csv_path = out_dir / "summary.csv"
        self.sweep_name = sweep_name
        self.sweep_file = sweep_file
        self.created = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.entries: dict[str, Cell] = {}
        self.order: list[str] = []  # the plan's cell order
        #: the sweep file's slo_attainment, kept for the report's capacity table
        self.slo_attainment = DEFAULT_ATTAINMENT

    @classmethod
    def load(cls, out_dir: Path, sweep_name: str, sweep_file: str) -> SweepIndex:
        idx = cls(out_dir, sweep_name, sweep_file)
        if not idx.path.is_file():
            return idx
        try:
            data = load_sweep(idx.path)
        except UserError as exc:
            raise UserError(f"{exc.lines[0]}; restore it or start a new sweep directory") from None
        idx.created = data.created
        for entry in data.cells:
            idx.entries[entry.id] = entry
        return idx

    def is_complete(self, cell_id: str) -> bool:
        entry = self.entries.get(cell_id)
        if entry is None or entry.status != "complete" or entry.run_dir is None:
            return False
        return (self.out_dir / entry.run_dir / "summary.json").is_file()

    def record(self, entry: Cell) -> None:
        self.entries[entry.id] = entry
        self.write()

    def ordered(self) -> list[Cell]:
        seen = [self.entries[i] for i in self.order if i in self.entries]
        extra = [e for i, e in self.entries.items() if i not in set(self.order)]
        return seen + extra

    def write(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        data = IndexFile(
            sweep=self.sweep_name,
            sweep_file=self.sweep_file,
            created=self.created,
            updated=time.strftime("%Y-%m-%dT%H:%M:%S"),
            slo_attainment=self.slo_attainment,
            cells=self.ordered(),
        )
        atomic_write(self.path, FILES["index.json"].dumps(data))
        atomic_write(self.csv_path, summary_csv(self.ordered()))


def summary_csv(entries: Iterable[Cell]) -> str:
    entries = list(entries)
    facts = [e.startup_facts.model_dump(mode="json") for e in entries]
    extra_facts = sorted({k for f in facts for k in f} - set(FACT_COLUMNS))
    header = [
        "cell_id",
        "config_id",
        "varied",
        "flags",
        "scenario",
        "load_level",
        "repeat",
        "status",
        "startup_s",
        "failed_after_s",
        *FACT_COLUMNS,
        *METRIC_COLUMNS,
        *extra_facts,
        "reason",
        "run_dir",
    ]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for e, f in zip(entries, facts, strict=True):
        metrics = e.metrics.model_dump()
        w.writerow(
            [
                e.id,
                e.config_id,
                describe(e.varied),
                json.dumps(e.flags, sort_keys=True),
                e.scenario,
                e.load_level or "",
                e.repeat,
                e.status,
                _fmt(e.startup_s),
                _fmt(e.failed_after_s),
                *(_fmt(f.get(k)) for k in FACT_COLUMNS),
                *(_fmt(metrics.get(k)) for k in METRIC_COLUMNS),
                *(_fmt(f.get(k)) for k in extra_facts),
                e.reason or "",
                e.run_dir or "",
            ]
        )
    return buf.getvalue()


def _fmt(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


# ---------------------------------------------------------------- closing table
def _mean(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


@dataclass
class RankRow:
    """One config's figures in one scenario: means over its complete repeats."""

    config_id: str
    varied: str
    cells: int
    complete: int
    goodput: float | None  # goodput_req_per_s: requests/s within every SLO
    good_pct: float | None  # goodput_fraction (0..1)
    rps: float | None
    tok_s: float | None
    ttft_p99: float | None
    itl_p99: float | None
    preemptions: float | None
    kv_max: float | None
    gpu_gib: float | None
    load: str | None
    status: str
    reason: str | None
    quality: CellQuality | None
    finding: str | None
    acceptance: float | None = None  # speculative decoding: accepted / drafted tokens (guide 000)
    accept_len: float | None = None  # mean acceptance length

    @property
    def quality_failed(self) -> bool:
        """The config's quality verdict (harness/sweep/quality_step.py) says it must not be ranked."""
        return self.quality is not None and self.quality.passed is False

    @property
    def unranked(self) -> str | None:
        """Why a complete config is shown but not ranked: a failed quality gate, or speculation
        below 50% acceptance (guide 001: below 50% acceptance, speculative decoding hurts)."""
        if self.quality is not None and self.quality_failed:
            return f"quality {self.quality.status}: " + "; ".join(self.quality.reasons)
        return low_acceptance(self.acceptance)


def quality_failed(row: RankRow) -> bool:
    return row.quality_failed


def ranking(entries: list[Cell]) -> dict[str, list[RankRow]]:
    """Per scenario: configs ranked by mean goodput (req/s under the SLOs) over complete repeats;
    configs with no complete cell follow, with their reason."""
    by_scenario: dict[str, dict[str, list[Cell]]] = {}
    for e in entries:
        by_scenario.setdefault(cell_label(e), {}).setdefault(e.config_id, []).append(e)
    out: dict[str, list[RankRow]] = {}
    for scenario, configs in by_scenario.items():
        rows = []
        for config_id, cells in configs.items():
            done = [c for c in cells if c.status == "complete"]
            ms = [c.metrics for c in done]
            rows.append(
                RankRow(
                    config_id=config_id,
                    varied=describe(cells[0].varied) or "(base)",
                    cells=len(cells),
                    complete=len(done),
                    goodput=_mean(m.goodput_req_per_s for m in ms),
                    good_pct=_mean(m.goodput_fraction for m in ms),
                    rps=_mean(m.req_per_s for m in ms),
                    tok_s=_mean(m.output_tok_per_s for m in ms),
                    ttft_p99=_mean(m.ttft_p99_ms for m in ms),
                    itl_p99=_mean(m.itl_p99_ms for m in ms),
                    preemptions=_mean(m.preemptions for m in ms),
                    kv_max=_mean(m.kv_usage_max for m in ms),
                    gpu_gib=_mean(m.gpu_memory_used_max_gib for m in ms),
                    load=next((t for m in ms if (t := load_text(m))), None),
                    status="complete" if len(done) == len(cells) else (cells[-1].status if not done else "some failed"),
                    reason=next((c.reason for c in cells if c.reason), None),
                    quality=next((c.quality for c in cells if c.quality), None),
                    finding=next((m.finding for m in ms if m.finding), None),
                    acceptance=_mean(m.spec_acceptance_rate for m in ms),
                    accept_len=_mean(m.spec_mean_acceptance_length for m in ms),
                )
            )
        # a config that failed the quality gate, or speculates below 50% acceptance, is shown
        # with its numbers but never ranked
        rankable = [r for r in rows if r.complete and not r.unranked]
        ranked = sorted(rankable, key=lambda r: -(r.goodput if r.goodput is not None else (r.rps or 0.0)))
        out[scenario] = ranked + [r for r in rows if r.complete and r.unranked] + [r for r in rows if not r.complete]
    return out


def capacity_lines(entries: list[Cell], attainment: float = DEFAULT_ATTAINMENT) -> list[str]:
    cap = capacity(entries, attainment)
    if not cap:
        return []
    lines = [
        f"capacity under the SLOs: the highest load with >= {100 * attainment:g}% of requests within them (every lower load too)"
    ]
    for scenario, rows in cap.items():
        parts = []
        for r in rows:
            held = r.held.level if r.held else "none of the levels"
            if r.held and not r.broke and r.held.level == top_level(entries, r.config_id):
                held = f">= {held} (the highest level tried; it may carry more)"  # audit D21: read as a limit
            text = f"{r.config_id}: {held}"
            if r.broke:
                text += f" (at {r.broke.level}: {100 * r.broke.good_fraction:.0f}% good)"
            parts.append(text)
        lines.append(f"  scenario {scenario}: " + " · ".join(parts))
    return lines


def ranking_table(entries: list[Cell], attainment: float = DEFAULT_ATTAINMENT) -> str:
    lines = []
    for scenario, rows in ranking(entries).items():
        mixed = mixed_loads(rows)
        if not any(r.complete for r in rows):
            lines.append(f"scenario {scenario}: nothing to rank: no config produced results")
        elif mixed:
            lines.append(
                f"scenario {scenario}: configs NOT ranked: they ran at different client loads ({', '.join(mixed)}; "
                "vary.link), so their goodput is not one comparison; compare configs at equal load (sweep `loads`)"
            )
        else:
            lines.append(f"scenario {scenario}: configs ranked by goodput (req/s meeting the SLOs)")
        with_quality = any(r.quality for r in rows)
        with_gpu = any(r.gpu_gib is not None for r in rows)
        with_spec = any(r.acceptance is not None for r in rows)
        head = (
            f"  {'#':>2}  {'config':<36} {'load':>10} {'goodput':>8} {'good%':>6} {'req/s':>7} {'tok/s':>8} {'TTFT p99':>9} "
            f"{'ITL p99':>8} {'preempt':>8} {'KV max':>6}"
            + (f" {'GPU GiB':>8}" if with_gpu else "")
            + (f" {'accept':>6} {'acc.len':>7}" if with_spec else "")
        )
        lines.append(head + ("  quality (vs baseline)" if with_quality else ""))
        rank = 0
        for r in rows:
            if r.complete:
                failed = r.unranked
                if not failed:
                    rank += 1
                q = f"  {(r.quality.short if r.quality else '') or '-'}" if with_quality else ""
                gpu = f" {_n(r.gpu_gib, '.1f'):>8}" if with_gpu else ""
                spec = f" {_pct(r.acceptance):>6} {_n(r.accept_len, '.2f'):>7}" if with_spec else ""
                mark = "x" if failed else "-" if mixed else rank
                lines.append(
                    f"  {mark:>2}  {_cut(r.config_id, 36):<36} {_cut(r.load or '-', 10):>10} {_n(r.goodput, '.2f'):>8} "
                    f"{_pct(r.good_pct):>6} {_n(r.rps, '.2f'):>7} {_n(r.tok_s, '.0f'):>8} {_n(r.ttft_p99, '.0f', ' ms'):>9} "
                    f"{_n(r.itl_p99, '.1f', ' ms'):>8} {_n(r.preemptions, '.0f'):>8} {_pct(r.kv_max):>6}{gpu}{spec}{q}"
                )
            else:
                lines.append(f"   -  {_cut(r.config_id, 36):<36} {r.status}: {_cut(r.reason or '', 240)}")
        found = [r for r in rows if r.finding]
        if found:
            lines.append("  top finding per config (harness.diagnose; every finding in the cell's summary.json):")
            for r in found:
                lines.append(f"    {_cut(r.config_id, 36)}: {_cut(r.finding or '', 200)}")
        for r in rows:
            if r.complete and r.unranked:
                lines.append(f"   x  {r.config_id}: not ranked, " + _cut(r.unranked or "", 200))
        lines.append("")
    lines += capacity_lines(entries, attainment)
    more = facts_lines(entries)
    if more:
        lines += ["", *more]
    return "\n".join(lines).rstrip() + "\n"


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _n(v: float | None, spec: str, unit: str = "") -> str:
    return "-" if v is None else f"{v:{spec}}{unit}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"
