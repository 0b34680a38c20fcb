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
from pathlib import Path
from typing import Any

from harness.metrics.table import Metric, shown
from harness.results.engine_facts import facts_lines
from harness.results.sweep_index import DEFAULT_ATTAINMENT, capacity, scenario_label, top_level
from harness.sweep.flags import describe

#: latency columns from the metric table (harness.metrics.table, place "sweep"): <short>_<stat>_ms
SWEEP_STATS = ("p50", "p99")
LATENCY_COLUMNS = tuple(f"{m.short}_{q}_ms" for m in shown("sweep") for q in SWEEP_STATS)
METRIC_COLUMNS = (
    *LATENCY_COLUMNS,
    "req_per_s", "output_tok_per_s", "input_tok_per_s", "goodput_req_per_s", "goodput_fraction",
    "kv_usage_max", "preemptions", "prefix_hit_rate", "completed", "failed",
    "client_concurrency", "client_rate", "gpu_memory_used_max_gib",
)
FACT_COLUMNS = ("kv_cache_tokens", "max_concurrency", "model_load_s", "graph_capture_s", "init_engine_s")

# paths in the engine block of summary.json (harness.telemetry.block) first, then older spellings
_CANDIDATES = {
    "kv_usage_max": ("kv_usage.max", "kv_usage_max", "kv_cache_usage.max"),
    "preemptions": ("preemptions.count", "preemptions", "num_preemptions"),
    "prefix_hit_rate": ("prefix_cache.hit_rate", "prefix_cache_hit_rate", "prefix_hit_rate"),
}


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------- metrics of one run
def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    else:
        out[prefix] = obj
    return out


def _engine_value(engine: dict[str, Any], name: str) -> float | None:
    flat = {k: v for k, v in _flatten(engine).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    for cand in _CANDIDATES[name]:
        for key, value in flat.items():
            if key == cand or key.endswith("." + cand):
                return float(value)
    return None


def _dist(latency: dict[str, Any], name: str, q: str) -> float | None:
    block = latency.get(name) or {}
    value = block.get(q) if isinstance(block, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def _source(lat: dict[str, Any], m: Metric) -> str:
    """The metric's key, or its fallback where it holds no samples (ITL per chunk without token counts)."""
    return m.fallback if m.fallback and not (lat.get(m.name) or {}).get("count") else m.name


def run_metrics(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary.csv metrics of one run, from its summary.json (a RunSummary dumped)."""
    lat = summary.get("latency_ms") or {}
    req = summary.get("requests") or {}
    tok = summary.get("tokens") or {}
    good = (summary.get("goodput") or {}).get("overall") or {}
    engine = summary.get("engine") or {}
    m: dict[str, Any] = {
        **{f"{m.short}_{q}_ms": _dist(lat, _source(lat, m), q) for m in shown("sweep") for q in SWEEP_STATS},
        "req_per_s": req.get("rps"),
        "output_tok_per_s": tok.get("output_per_s"),
        "input_tok_per_s": tok.get("input_per_s"),
        "goodput_req_per_s": good.get("rps"),
        "goodput_fraction": good.get("fraction"),
        "kv_usage_max": _engine_value(engine, "kv_usage_max"),
        "preemptions": _engine_value(engine, "preemptions"),
        "prefix_hit_rate": _engine_value(engine, "prefix_hit_rate"),
        "completed": req.get("completed"),
        "failed": req.get("failed"),
        # the client load the cell ran at: with vary.link it differs between configs (audit D3)
        "client_concurrency": (summary.get("load") or {}).get("concurrency"),
        "client_rate": (summary.get("load") or {}).get("rate"),
        # NVML's peak, the figure a GPU sweep is run for (audit D7: only in each cell's summary.json)
        "gpu_memory_used_max_gib": _gib((engine.get("gpu_memory") or {}).get("used_max_bytes")),
    }
    m.update(diagnosis_metrics(summary))
    return m


def diagnosis_metrics(summary: dict[str, Any]) -> dict[str, Any]:
    """The diagnosis figures a sweep compares across configs (harness.diagnose), and the top finding."""
    d = summary.get("diagnosis") or {}
    inter = d.get("interference") or {}
    events = (d.get("engine_log") or {}).get("events") or {}
    found = summary.get("findings") or []
    return {
        "itl_p99_inside_prefill_ms": (inter.get("inside") or {}).get("p99_ms"),
        "itl_p99_outside_prefill_ms": (inter.get("outside") or {}).get("p99_ms"),
        "recompilations": (events.get("recompilation") or {}).get("count", 0 if events or d.get("engine_log") else None),
        "memory_growth_gib": (d.get("memory") or {}).get("growth_gib"),
        "drift": ((d.get("timeslices") or {}).get("steady_state") or {}).get("drift"),
        "finding": f"{found[0]['text']}: {found[0]['advice']}" if found else None,
        "finding_ids": ",".join(f["id"] for f in found) or None,
    }


def _gib(n: Any) -> float | None:
    return float(n) / 2**30 if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0 else None


def load_text(metrics: dict[str, Any]) -> str | None:
    """A cell's client load in words: '32 users' (closed loop) or '4 req/s' (open loop)."""
    if metrics.get("client_concurrency") is not None:
        return f"{metrics['client_concurrency']:g} users"
    if metrics.get("client_rate") is not None:
        return f"{metrics['client_rate']:g} req/s"
    return None


def mixed_loads(rows: list[dict[str, Any]]) -> list[str]:
    """The distinct client loads of a scenario's configs when there is more than one (vary.link):
    their goodput is then not one comparison and they are not ranked."""
    loads = list(dict.fromkeys(r["load"] for r in rows if r.get("complete") and r.get("load")))
    return loads if len(loads) > 1 else []


def read_run_summary(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- the index
class SweepIndex:
    def __init__(self, out_dir: Path, sweep_name: str, sweep_file: str) -> None:
        self.out_dir = out_dir
        self.path = out_dir / "index.json"
        self.csv_path = out_dir / "summary.csv"
        self.sweep_name = sweep_name
        self.sweep_file = sweep_file
        self.created = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.entries: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []  # the plan's cell order
        #: the sweep file's slo_attainment, kept for the report's capacity table
        self.slo_attainment = DEFAULT_ATTAINMENT

    @classmethod
    def load(cls, out_dir: Path, sweep_name: str, sweep_file: str) -> SweepIndex:
        idx = cls(out_dir, sweep_name, sweep_file)
        try:
            data = json.loads(idx.path.read_text())
        except FileNotFoundError:
            return idx
        except ValueError as exc:
            from harness.errors import UserError

            raise UserError(f"{idx.path}: not valid JSON ({exc}); restore it or start a new sweep directory") from None
        idx.created = data.get("created", idx.created)
        for entry in data.get("cells", []):
            idx.entries[entry["id"]] = entry
        return idx

    def is_complete(self, cell_id: str) -> bool:
        entry = self.entries.get(cell_id)
        if not entry or entry.get("status") != "complete":
            return False
        return (self.out_dir / entry["run_dir"] / "summary.json").is_file()

    def record(self, entry: dict[str, Any]) -> None:
        self.entries[entry["id"]] = entry
        self.write()

    def ordered(self) -> list[dict[str, Any]]:
        seen = [self.entries[i] for i in self.order if i in self.entries]
        extra = [e for i, e in self.entries.items() if i not in set(self.order)]
        return seen + extra

    def write(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        data = {
            "sweep": self.sweep_name,
            "sweep_file": self.sweep_file,
            "created": self.created,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "slo_attainment": self.slo_attainment,
            "cells": self.ordered(),
        }
        atomic_write(self.path, json.dumps(data, indent=2, default=str) + "\n")
        atomic_write(self.csv_path, summary_csv(self.ordered()))


def summary_csv(entries: Iterable[dict[str, Any]]) -> str:
    entries = list(entries)
    extra_facts = sorted({k for e in entries for k in (e.get("startup_facts") or {})} - set(FACT_COLUMNS))
    header = [
        "cell_id", "config_id", "varied", "flags", "scenario", "load_level", "repeat", "status", "startup_s", "failed_after_s",
        *FACT_COLUMNS, *METRIC_COLUMNS, *extra_facts, "reason", "run_dir",
    ]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for e in entries:
        facts = e.get("startup_facts") or {}
        metrics = e.get("metrics") or {}
        w.writerow([
            e["id"], e["config_id"], describe(e.get("varied") or {}), json.dumps(e.get("flags") or {}, sort_keys=True),
            e["scenario"], e.get("load_level") or "", e["repeat"], e["status"], _fmt(e.get("startup_s")), _fmt(e.get("failed_after_s")),
            *(_fmt(facts.get(k)) for k in FACT_COLUMNS),
            *(_fmt(metrics.get(k)) for k in METRIC_COLUMNS),
            *(_fmt(facts.get(k)) for k in extra_facts),
            e.get("reason") or "", e.get("run_dir") or "",
        ])
    return buf.getvalue()


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


# ---------------------------------------------------------------- closing table
def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def quality_failed(row: dict[str, Any]) -> bool:
    """The config's quality verdict (harness/sweep/quality_step.py) says it must not be ranked."""
    q = row.get("quality")
    return bool(q) and q.get("passed") is False


def ranking(entries: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per scenario: configs ranked by mean goodput (req/s under the SLOs) over complete repeats;
    configs with no complete cell follow, with their reason."""
    by_scenario: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for e in entries:
        by_scenario.setdefault(scenario_label(e), {}).setdefault(e["config_id"], []).append(e)
    out: dict[str, list[dict[str, Any]]] = {}
    for scenario, configs in by_scenario.items():
        rows = []
        for config_id, cells in configs.items():
            done = [c for c in cells if c["status"] == "complete"]
            ms = [c.get("metrics") or {} for c in done]
            rows.append({
                "config_id": config_id,
                "varied": describe(cells[0].get("varied") or {}) or "(base)",
                "cells": len(cells),
                "complete": len(done),
                "goodput": _mean([m.get("goodput_req_per_s") for m in ms]),
                "good_pct": _mean([m.get("goodput_fraction") for m in ms]),
                "rps": _mean([m.get("req_per_s") for m in ms]),
                "tok_s": _mean([m.get("output_tok_per_s") for m in ms]),
                "ttft_p99": _mean([m.get("ttft_p99_ms") for m in ms]),
                "itl_p99": _mean([m.get("itl_p99_ms") for m in ms]),
                "preemptions": _mean([m.get("preemptions") for m in ms]),
                "kv_max": _mean([m.get("kv_usage_max") for m in ms]),
                "gpu_gib": _mean([m.get("gpu_memory_used_max_gib") for m in ms]),
                "load": next((load_text(m) for m in ms if load_text(m)), None),
                "status": "complete" if len(done) == len(cells) else (cells[-1]["status"] if not done else "some failed"),
                "reason": next((c.get("reason") for c in cells if c.get("reason")), None),
                "quality": next((c["quality"] for c in cells if c.get("quality")), None),
                "finding": next((m["finding"] for m in ms if m.get("finding")), None),
            })
        # a config that failed the quality gate is shown with its numbers but never ranked
        rankable = [r for r in rows if r["complete"] and not quality_failed(r)]
        ranked = sorted(rankable, key=lambda r: -(r["goodput"] if r["goodput"] is not None else (r["rps"] or 0.0)))
        out[scenario] = ranked + [r for r in rows if r["complete"] and quality_failed(r)] + [r for r in rows if not r["complete"]]
    return out


def capacity_lines(entries: list[dict[str, Any]], attainment: float = DEFAULT_ATTAINMENT) -> list[str]:
    cap = capacity(entries, attainment)
    if not cap:
        return []
    lines = [f"capacity under the SLOs: the highest load with >= {100 * attainment:g}% of requests within them (every lower load too)"]
    for scenario, rows in cap.items():
        parts = []
        for r in rows:
            held = r["held"]["level"] if r["held"] else "none of the levels"
            if r["held"] and not r["broke"] and r["held"]["level"] == top_level(entries, r["config_id"]):
                held = f">= {held} (the highest level tried; it may carry more)"  # audit D21: read as a limit
            text = f"{r['config_id']}: {held}"
            if r["broke"]:
                text += f" (at {r['broke']['level']}: {100 * r['broke']['good_fraction']:.0f}% good)"
            parts.append(text)
        lines.append(f"  scenario {scenario}: " + " · ".join(parts))
    return lines


def ranking_table(entries: list[dict[str, Any]], attainment: float = DEFAULT_ATTAINMENT) -> str:
    lines = []
    for scenario, rows in ranking(entries).items():
        mixed = mixed_loads(rows)
        if not any(r["complete"] for r in rows):
            lines.append(f"scenario {scenario}: nothing to rank: no config produced results")
        elif mixed:
            lines.append(f"scenario {scenario}: configs NOT ranked: they ran at different client loads ({', '.join(mixed)}; "
                         "vary.link), so their goodput is not one comparison; compare configs at equal load (sweep `loads`)")
        else:
            lines.append(f"scenario {scenario}: configs ranked by goodput (req/s meeting the SLOs)")
        with_quality = any(r.get("quality") for r in rows)
        with_gpu = any(r.get("gpu_gib") is not None for r in rows)
        head = (f"  {'#':>2}  {'config':<36} {'load':>10} {'goodput':>8} {'good%':>6} {'req/s':>7} {'tok/s':>8} {'TTFT p99':>9} "
                f"{'ITL p99':>8} {'preempt':>8} {'KV max':>6}" + (f" {'GPU GiB':>8}" if with_gpu else ""))
        lines.append(head + ("  quality (vs baseline)" if with_quality else ""))
        rank = 0
        for r in rows:
            if r["complete"]:
                failed = quality_failed(r)
                if not failed:
                    rank += 1
                q = f"  {(r.get('quality') or {}).get('short') or '-'}" if with_quality else ""
                gpu = f" {_n(r.get('gpu_gib'), '.1f'):>8}" if with_gpu else ""
                mark = "x" if failed else "-" if mixed else rank
                lines.append(
                    f"  {mark:>2}  {_cut(r['config_id'], 36):<36} {_cut(r.get('load') or '-', 10):>10} {_n(r['goodput'], '.2f'):>8} "
                    f"{_pct(r['good_pct']):>6} {_n(r['rps'], '.2f'):>7} {_n(r['tok_s'], '.0f'):>8} {_n(r['ttft_p99'], '.0f', ' ms'):>9} "
                    f"{_n(r['itl_p99'], '.1f', ' ms'):>8} {_n(r['preemptions'], '.0f'):>8} {_pct(r['kv_max']):>6}{gpu}{q}"
                )
            else:
                lines.append(f"   -  {_cut(r['config_id'], 36):<36} {r['status']}: {_cut(r['reason'] or '', 90)}")
        found = [r for r in rows if r.get("finding")]
        if found:
            lines.append("  top finding per config (harness.diagnose; every finding in the cell's summary.json):")
            for r in found:
                lines.append(f"    {_cut(r['config_id'], 36)}: {_cut(r['finding'], 200)}")
        failed_q = [r for r in rows if r["complete"] and quality_failed(r)]
        for r in failed_q:
            lines.append(f"   x  {r['config_id']}: not ranked, quality {r['quality']['status']}: "
                         + _cut("; ".join(r["quality"].get("reasons") or []), 160))
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
