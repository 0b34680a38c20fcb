"""Turn a loaded run or sweep into a Document: warnings first, then tables, then figures."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from harness.compare.metrics import MetricDef
from harness.report import diagnosis as D
from harness.report import figures as F
from harness.report import sweep_view as V
from harness.report import tables as T
from harness.report.data import RunData
from harness.report.document import Align, Bullets, Callout, Document, Figure, Heading, Paragraph, Table, right
from harness.report.groups import fleet_table, group_tables, sessions_table
from harness.report.metrics import fmt_num, fmt_pct
from harness.report.sweep_data import SweepData
from harness.report.traffic import block_trace_table, cache_table, fleet_sweep_table, ttft_parts_blocks
from harness.results.engine_facts import facts_line
from harness.results.hdr import Hist
from harness.results.models.facts import StartupFacts
from harness.results.run_metrics import BY_NAME as RUN
from harness.results.sweep_index import capacity, top_level


def _when(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return ""
    return datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def validity_items(run: RunData) -> list[str]:
    """Everything that limits how far the numbers can be trusted, most important first."""
    s = run.summary
    items: list[str] = []
    items += list(s.validity.warnings)
    missing = s.engine.telemetry.missing_reason
    if missing:
        msg = f"engine telemetry missing: {missing}"
        if not any("telemetry" in i for i in items):
            items.append(msg)
    items += [n for n in run.notes if n not in items]
    return items


def _warnings_block(items: list[str]) -> Callout:
    if items:
        return Callout("Validity warnings: read these before the numbers", items, "warning")
    return Callout("No validity warnings: client kept up, usage matched, telemetry complete", [], "ok")


# ---------------------------------------------------------------- run report
def run_figures(run: RunData) -> list[Figure]:
    figs: list[Figure] = []
    classes = list(run.summary.per_class) or [c for c in run.classes]
    for metric, title, what in (
        ("ttft", "TTFT percentile distribution", "time to first token"),
        ("itl_token", "ITL percentile distribution (per token)", "inter-token latency"),
    ):
        series: list[F.Series] = []
        h = run.hist(metric)
        if h is not None:
            series.append(F.Series("all requests", h))
        if len(classes) > 1:  # one class would only repeat the "all requests" line
            for i, cls in enumerate(classes):
                hc = run.hist(metric, cls)
                if hc is not None:
                    series.append(F.Series(f"class {cls}", hc, color=F.PALETTE[i % len(F.PALETTE)]))
        if metric == "itl_token":
            hc = run.hist("itl_chunk")
            if hc is not None and series and not _same(hc, series[0].hist):  # equal when every chunk holds one token
                series.append(F.Series("all, per chunk (multi-token chunks not split)", hc, style=":", color="#7f7f7f"))
        if not series:
            continue
        src = (
            "HDR histograms"
            if run.histograms.get("_all", {}).get(metric)
            else "per-request records (histograms.json missing)"
        )
        fig = F.percentile_figure(series, f"{title}", ylabel=f"{what} (ms)")
        figs.append(
            Figure(
                metric if metric == "ttft" else "itl",
                title,
                f"Latency at each percentile, from the {src}; each step right on the x axis is 10× rarer, "
                "so the tail is readable. Lines stop where the sample count runs out.",
                fig,
            )
        )
    engine_missing = ""
    if run.summary.engine.telemetry.missing_reason:
        engine_missing = run.summary.engine.telemetry.missing_reason
    elif run.engine_metrics is None:
        engine_missing = "engine_metrics.jsonl missing"
    if run.engine_metrics or run.progress:
        fig = F.over_time_figure(run.engine_metrics, run.progress, run.summary.window, engine_missing)
        figs.append(
            Figure(
                "over_time",
                "Over time",
                "KV cache usage, engine queue, preemptions and throughput across the run; the grey band is warmup "
                "(excluded from every number above).",
                fig,
            )
        )
    return figs


def _same(a: Hist, b: Hist) -> bool:
    return (
        a.total == b.total
        and a.values.shape == b.values.shape
        and bool((a.values == b.values).all())
        and bool((a.counts == b.counts).all())
    )


def build_run_report(run: RunData) -> Document:
    s = run.summary
    w = s.window
    subtitle_parts = [f"scenario `{run.name}`"]
    if s.target.model:
        subtitle_parts.append(f"model `{s.target.model}`")
    if s.target.url:
        subtitle_parts.append(f"target {s.target.url}")
    if w.start:
        subtitle_parts.append(_when(w.start))
    subtitle_parts.append(f"status **{s.status}**")
    fp = run.fingerprint.value
    if fp:
        subtitle_parts.append(f"fingerprint `{fp}`")
    doc = Document(title=f"Run report: {run.name}", subtitle=" · ".join(subtitle_parts), kind="run")
    found = D.findings_callout(run)  # the first screen: the three most important findings, with advice
    if found is not None:
        doc.add(found)
    doc.add(_warnings_block(validity_items(run)))
    doc.add(Heading("Record list"))
    doc.add(Paragraph("The values the tuning guides say to record before and after every change."))
    doc.add(T.record_table(run))
    if not run.summary_derived:
        doc.add(T.engine_table(run))
    et = T.errors_table(run)
    if et is not None:
        doc.add(et)
    for extra in (sessions_table(run), fleet_table(run), block_trace_table(run), cache_table(run)):
        if extra is not None:
            doc.add(extra)
    doc.add(*group_tables(run))
    doc.add(*ttft_parts_blocks(run))
    figs = run_figures(run)
    if figs:
        doc.add(Heading("Distributions"))
        doc.add(*[f for f in figs if f.name != "over_time"])
        over = [f for f in figs if f.name == "over_time"]
        if over:
            doc.add(Heading("Over time"), *over)
    else:
        doc.add(Callout("No figures", ["neither histograms.json nor requests.jsonl holds latency samples"], "note"))
    doc.add(*D.diagnosis_blocks(run))
    doc.add(Heading("Measurement"))
    doc.add(T.measurement_table(run))
    doc.add(Paragraph(f"Run directory: `{run.path}`"))
    return doc


# ---------------------------------------------------------------- sweep report
def _ranked_table(scenario: str, rows: list[V.ConfigResult], key: Any, best: str | None) -> Table:
    repeats = max((len(r.cells) for r in rows), default=1)
    mixed = V.mixed_loads(rows)
    with_gpu = any(r.gpu_memory_gib is not None for r in rows)
    with_spec = any(r.spec("spec_acceptance_rate") is not None for r in rows)
    cols = [
        "#",
        "Config",
        "Flags",
        "Load",
        f"{key.label} ({key.unit})",
        "Good %",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "ITL p99",
        "E2E p99",
        "KV max",
        "Preempt.",
    ]
    if with_gpu:
        cols.append("GPU mem (GiB)")
    if with_spec:  # guide 000's speculation values
        cols += ["Acceptance", "Accept. length"]
    # TP width vs replicas (engine.replicas): fleet throughput per device beside the latencies
    per_device = any((r.devices or 1) > 1 or r.replicas > 1 for r in rows)
    if per_device:
        cols += ["Replicas x devices", "out tok/s per device"]
    if repeats > 1:
        cols.append("Repeats")
    out: list[list[str]] = []
    rank = 0
    for r in rows:
        if not r.runs:
            cells = ["—", r.config, V.flags_text(r.flags), r.status.upper() + (f": {r.reason}" if r.reason else "")]
            cells += [""] * (len(cols) - len(cells))
            out.append(cells)
            continue
        if not r.unranked:
            rank += 1
        kv = [_kv_max(run) for run in r.runs]
        kv_vals = [k for k in kv if k is not None]
        pre = [_preempt(run) for run in r.runs]
        pre_vals = [p for p in pre if p is not None]
        name = f"★ **{r.config}**" if r.config == best else r.config
        spread = r.spread(key)
        main = fmt_num(r.value(key)) + (f" ±{fmt_num(spread / 2)}" if spread is not None else "")
        cells = [
            "x" if r.unranked else "—" if mixed else str(rank),
            name,
            V.flags_text(r.flags),
            r.load or "—",
            main,
            fmt_pct(r.value("goodput_pct"), 0),
            fmt_num(r.value("rps")),
            fmt_num(r.value("output_tps")),
            fmt_num(r.value("ttft.p50")),
            fmt_num(r.value("ttft.p99")),
            fmt_num(r.value("itl.p99")),
            fmt_num(r.value("e2e.p99")),
            fmt_pct(100 * max(kv_vals) if kv_vals and max(kv_vals) <= 1.5 else (max(kv_vals) if kv_vals else None), 0),
            f"{int(sum(pre_vals) / len(pre_vals)):,}" if pre_vals else "—",
        ]
        if with_gpu:
            cells.append(fmt_num(r.gpu_memory_gib))
        if with_spec:
            acc = r.spec("spec_acceptance_rate")
            cells += [fmt_pct(None if acc is None else 100 * acc, 0), fmt_num(r.spec("spec_mean_acceptance_length"))]
        if per_device:
            d, tps = r.devices or 1, r.value("output_tps")
            cells += [f"{r.replicas} x {d // max(r.replicas, 1)}", fmt_num(tps / d if tps is not None else None)]
        if repeats > 1:
            cells.append(str(len(r.runs)))
        if r.status == "partial":
            cells[1] += " (partial)"
        out.append(cells)
    slo = ""
    for r in rows:
        if r.runs:
            slo = T.run_slo(r.runs[0])
            break
    notes = [
        "Latencies in ms (client-measured). ★ = best under the SLOs: highest goodput, ties broken by lower E2E p99."
    ]
    if mixed:
        notes.insert(
            0,
            f"Not ranked: the configs ran at different client loads ({', '.join(mixed)}; vary.link), so their "
            "goodput is not one comparison. Compare configs at equal load (sweep `loads`).",
        )
    if slo:
        notes.append(f"SLO: {slo}.")
    if repeats > 1:
        notes.append("With repeats, values are the mean of the repeats; ± is half the range between them.")
    align: list[Align] = ["r", "l", "l", *right(len(cols) - 3)]
    caption = (
        f"Scenario {scenario}: configs at different loads (not ranked)"
        if mixed
        else f"Scenario {scenario}: configs ranked by {key.label}"
    )
    return Table(cols, out, caption=caption, align=align, notes=notes)


def _kv_max(run: RunData) -> float | None:
    return RUN["kv_usage_max"].get(run.summary)


def _preempt(run: RunData) -> float | None:
    return RUN["preemptions"].get(run.summary)


def _scenarios_text(sweep: SweepData) -> str:
    files = list(dict.fromkeys(c.base_scenario or c.scenario for c in sweep.cells))
    levels = list(dict.fromkeys(c.load_level for c in sweep.cells if c.load_level))
    text = f"{len(files)} scenario{'s' if len(files) != 1 else ''}"
    return text + (f" × {len(levels)} load levels" if levels else "")


def sweep_validity_items(
    sweep: SweepData, failed: dict[str, str] | None = None, key: MetricDef | None = None
) -> list[str]:
    """The sweep's validity warnings (report box and `harness sweep`'s console): configs without
    results, each cell's warnings (one line for a warning many cells share), the sweep's notes."""
    if failed is None:
        failed = V.failed_configs(sweep)
    if key is None:
        key = V.ranking(sweep)[1]
    items: list[str] = []
    for cfg, reason in failed.items():
        items.append(f"config `{cfg}` ({V.flags_text(sweep.flags_of(cfg))}) produced no results: {reason}")
    # the same warning in many cells (a tokenizer offset, an engine without /metrics) is one line
    where: dict[str, list[str]] = {}
    with_runs = [(c, c.run) for c in sweep.cells if c.run is not None and c.config_id not in failed]
    for cell, run in with_runs:
        for w in validity_items(run):
            where.setdefault(w, []).append(f"{cell.config_id} × {cell.scenario} (repeat {cell.repeat})")
    for w, cells in where.items():
        if len(cells) == 1:
            items.append(f"{cells[0]}: {w}")
        elif len(cells) == len(with_runs):
            items.append(f"every cell ({len(cells)}): {w}")
        else:
            shown = ", ".join(cells[:3]) + (f" and {len(cells) - 3} more" if len(cells) > 3 else "")
            items.append(f"{len(cells)} cells ({shown}): {w}")
    for (cfg, scenario), r in V.results(sweep).items():
        if r.runs and r.unranked:
            items.append(f"config `{cfg}` × {scenario}: {r.unranked}")
    items += sweep.notes
    if key.key == "rps" and with_runs:  # a sweep that measured nothing has no ranking to explain (N13)
        items.append("no goodput in the results (no SLO set?): configs are ranked on requests/s instead")
    return items


def _facts_rows(sweep: SweepData) -> list[list[str]]:
    seen: dict[str, StartupFacts] = {}
    for c in sweep.cells:
        f = c.entry.startup_facts if c.entry is not None else None
        if f is not None and f.model_fields_set and c.config_id not in seen:
            seen[c.config_id] = f
    rows = [[cid, facts_line(f), f.max_model_len_warning or ""] for cid, f in seen.items()]
    return [r for r in rows if r[1] or r[2]]


def build_sweep_report(sweep: SweepData) -> Document:
    ranked, key = V.ranking(sweep)
    best = V.best_configs(ranked, key)
    failed = V.failed_configs(sweep)
    n_cells = len(sweep.cells)
    n_ok = sum(1 for c in sweep.cells if c.usable)
    doc = Document(
        title=f"Sweep report: {sweep.name}",
        subtitle=f"{len(sweep.configs)} configs × {_scenarios_text(sweep)}, {n_cells} cells ({n_ok} with results) · `{sweep.path}`",
        kind="sweep",
    )
    doc.add(_warnings_block(sweep_validity_items(sweep, failed, key)))

    common = sweep.common_flags()
    if common:
        doc.add(
            Paragraph(f"Flags every config shares: `{V.flags_text(common)}`; the tables show only the flags that vary.")
        )
    doc.add(Heading("Best config under the SLOs"))
    lines = []
    for scenario in sweep.scenarios:
        b = best.get(scenario)
        mixed = V.mixed_loads(ranked[scenario])
        if mixed:
            lines.append(
                f"scenario `{scenario}`: none chosen: the configs ran at different client loads ({', '.join(mixed)}), "
                "so their goodput is not one comparison"
            )
            continue
        if b is None:
            lines.append(f"scenario `{scenario}`: no config produced results")
            continue
        top = ranked[scenario][0]
        lines.append(
            f"scenario `{scenario}`: **{b}** ({V.flags_text(top.flags)}, {top.load or 'load unknown'}): "
            f"{fmt_num(top.value(key))} {key.unit} {key.label}, "
            f"{fmt_pct(top.value('goodput_pct'), 0)} of requests within the SLO"
        )
    doc.add(Bullets(lines))

    entries = [c.entry for c in sweep.cells if c.entry is not None]
    cap = capacity(entries, sweep.slo_attainment)
    if cap:
        doc.add(Heading("Capacity under the SLOs"))
        rows = []
        for scenario, crow in cap.items():
            for r in crow:
                held, broke = r.held, r.broke
                rows.append(
                    [
                        scenario,
                        r.config_id,
                        (
                            f"≥ {held.level} (highest tried)"
                            if not broke and held.level == top_level(entries, r.config_id)
                            else held.level
                        )
                        if held
                        else "none of the levels",
                        fmt_pct(100 * held.good_fraction, 0) if held else "—",
                        f"{broke.level} ({fmt_pct(100 * broke.good_fraction, 0)} good)"
                        if broke
                        else "none (every level held)",
                    ]
                )
        doc.add(
            Table(
                ["Scenario", "Config", "Highest load within the SLOs", "Good there", "First load beyond them"],
                rows,
                caption=f"The highest load level at which at least {100 * sweep.slo_attainment:g}% of requests met every SLO, "
                "and every lower level did too (sweep `loads`; `slo_attainment` sets the share)",
                align=["l", "l", "l", "r", "l"],
            )
        )

    facts = _facts_rows(sweep)
    if facts:
        doc.add(Heading("Engine startup facts"))
        doc.add(
            Table(
                ["Config", "What the engine's log says", "Warning"],
                facts,
                caption="Per config, from its first start's log: attention backend, CUDA-graph capture sizes and mode, "
                "the final max_model_len, quantization, KV-cache dtype, compile cache, engine version",
                align=["l", "l", "l"],
            )
        )

    doc.add(Heading("Ranking per scenario"))
    for scenario in sweep.scenarios:
        doc.add(_ranked_table(scenario, ranked[scenario], key, best.get(scenario)))

    fleets = fleet_sweep_table(sweep)
    if fleets is not None:
        doc.add(Heading("Fleets"), fleets)

    diag = D.sweep_diagnosis_table(sweep)
    if diag is not None:
        doc.add(Heading("Diagnosis per config"), diag)

    pts = V.points(sweep)
    if pts:
        doc.add(Heading("Figures"))
        doc.add(
            Figure(
                "latency_vs_throughput",
                "Latency against throughput per config",
                "Each config is a bar from its p50 (●) to its p99 (▲) latency at the output throughput it reached; "
                "the ringed config is the best under the SLOs. Down and to the right is better."
                + (
                    " With load levels, a config's points are joined in load order (p50 solid, p99 dashed) and "
                    "labelled with the level: where a curve turns upward, that config has run out of room."
                    if any(p.level for p in pts)
                    else ""
                ),
                F.latency_throughput_figure(pts, sweep.configs, sweep.scenarios, best),
            )
        )
        doc.add(
            Figure(
                "goodput",
                "Goodput per config and scenario",
                "Requests per second that met every SLO (bars) and the share of requests that did (label); "
                "★ marks the best config per scenario; failed configs are named.",
                F.goodput_figure(
                    pts, sweep.configs, sweep.scenarios, best, failed, metric_label=f"{key.label} ({key.unit})"
                ),
            )
        )

    doc.add(Heading("Cells"))
    rows = []
    for c in sweep.cells:
        link = f"`{c.run_dir.relative_to(sweep.path)}`" if c.run_dir is not None else "—"
        has_report = c.run_dir is not None and (c.run_dir / "report.html").is_file()
        rows.append(
            [
                c.id,
                c.config_id,
                c.scenario,
                str(c.repeat),
                c.status,
                fmt_num(c.startup_s),
                link + (" (report.html)" if has_report else ""),
                c.reason or "",
            ]
        )
    doc.add(
        Table(
            ["Cell", "Config", "Scenario", "Repeat", "Status", "Startup (s)", "Run directory", "Reason"],
            rows,
            caption="Every cell of the sweep",
            align=["l", "l", "l", "r", "l", "r", "l", "l"],
            notes=["`harness report <run directory>` writes a cell's own report (distributions, over-time plots)."],
        )
    )
    return doc
