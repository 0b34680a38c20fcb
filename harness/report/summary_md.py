"""A short Markdown summary of a run or sweep (and its comparison with a baseline) for CI job
pages: GitHub shows `$GITHUB_STEP_SUMMARY` on the run's page. Kept compact: the full story is
in report.html, uploaded as an artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.compare.metrics import METRICS, MetricDef
from harness.errors import UserError
from harness.report import sweep_view as V
from harness.report.build import validity_items
from harness.report.compare import Options, compare, render_markdown
from harness.report.data import RunData, kind_of, load_run
from harness.report.document import Table
from harness.report.metrics import fmt_num, fmt_pct
from harness.report.sweep_data import SweepData, load_sweep
from harness.report.writers.markdown import table_md


def _warn_lines(items: list[str], limit: int = 12) -> list[str]:
    if not items:
        return ["> ✅ No validity warnings.", ""]
    out = ["> [!WARNING]", "> **Validity warnings**"]
    out += [f"> - {i}" for i in items[:limit]]
    if len(items) > limit:
        out.append(f"> - … and {len(items) - limit} more (see report.md)")
    return [*out, ""]


def _run_md(run: RunData) -> list[str]:
    s = run.summary
    groups = [("all", s), *s.per_class.items()]
    keys = ["rps", "output_tps", "ttft.p50", "ttft.p99", "itl.p50", "itl.p99", "e2e.p99"]
    cols = ["metric"] + [g for g, _ in groups]
    rows = []
    for k in keys:
        m = METRICS[k]
        rows.append([f"{m.label} ({m.unit})"] + [fmt_num(_class_value(m, b)) for _, b in groups])
    g = METRICS["goodput_pct"].get(s)
    rows.append(["goodput (% within SLO)", fmt_pct(g)] + ["" for _ in groups[1:]])
    rows.append(
        ["failed requests", f"{s.requests.failed:,} of {s.requests.completed + s.requests.failed:,}"]
        + ["" for _ in groups[1:]]
    )
    out = [*table_md(Table(cols, rows)), ""]
    e = s.engine
    bits = []
    kv_max = e.kv_usage.max
    if kv_max is not None:
        bits.append(f"KV cache max {fmt_pct(100 * kv_max if kv_max <= 1.5 else kv_max, 0)}")
    if e.preemptions.count is not None:
        bits.append(f"{e.preemptions.count:,} preemptions")
    if e.prefix_cache.hit_rate is not None:
        bits.append(f"prefix cache hit rate {fmt_pct(100 * e.prefix_cache.hit_rate, 0)}")
    gm = e.gpu_memory
    if gm.used_max_bytes is not None:
        holding = [p for p in gm.processes or [] if p.used_max_bytes]
        others = f" (device-wide: {len(holding)} processes, see the engine table)" if gm.note and holding else ""
        bits.append(f"GPU memory max {gm.used_max_bytes / 2**30:,.1f} GiB{others}")
    if bits:
        out += ["Engine: " + ", ".join(bits) + ".", ""]
    return out


def _class_value(m: MetricDef, block: Any) -> float | None:  # the summary or a class block (duck-typed)
    """MetricDef.get reads a RunSummary; a class block has the same fields for these metrics."""
    try:
        return m.get(block)
    except AttributeError:
        return None


def _sweep_md(sweep: SweepData) -> list[str]:
    ranked, key = V.ranking(sweep)
    best = V.best_configs(ranked, key)
    out: list[str] = []
    for scenario, rows in ranked.items():
        b = best.get(scenario)
        mixed = V.mixed_loads(rows)
        out.append(
            f"**Scenario `{scenario}`**: best under the SLOs: "
            + (
                f"**{b}**"
                if b
                else f"none chosen (the configs ran at different client loads: {', '.join(mixed)})"
                if mixed
                else "none"
            )
        )
        out.append("")
        trows = []
        for i, r in enumerate(rows, 1):
            if not r.runs:
                trows.append(
                    ["—", r.config, V.flags_text(r.flags), f"{r.status}: {r.reason or ''}".strip(), "", "", ""]
                )
                continue
            trows.append(
                [
                    str(i),
                    ("★ " if r.config == b else "") + r.config,
                    V.flags_text(r.flags),
                    fmt_num(r.value(key)),
                    fmt_pct(r.value("goodput_pct"), 0),
                    fmt_num(r.value("ttft.p99")),
                    fmt_num(r.value("itl.p99")),
                ]
            )
        out += [
            *table_md(
                Table(
                    [
                        "#",
                        "config",
                        "flags",
                        f"{key.label} ({key.unit})",
                        "within SLO",
                        "TTFT p99 (ms)",
                        "ITL p99 (ms)",
                    ],
                    trows,
                    align=["r", "l", "l", "r", "r", "r", "r"],
                )
            ),
            "",
        ]
    return out


def build_summary(
    path: Path | str,
    compare_to: str | None = None,
    opts: Options | None = None,
    metrics: list[MetricDef] | None = None,
    title: str | None = None,
    baseline_root: Path | None = None,
) -> tuple[str, int | None]:
    """(Markdown, comparison exit code or None). A comparison that cannot be made is reported in
    the Markdown (the `compare` step is what gates)."""
    p = Path(path)
    if not p.is_dir():
        raise UserError(f"{p}: no such directory; pass the run or sweep directory to summarize")
    kind = kind_of(p)
    lines: list[str] = []
    if kind == "sweep":
        sweep = load_sweep(p, requests=None)  # the summary reads no per-request records
        n_ok = sum(1 for c in sweep.cells if c.usable)
        lines += [
            f"## {title or f'harness sweep `{sweep.name}`'}",
            "",
            f"{len(sweep.configs)} configs × {len(sweep.scenarios)} scenarios, {n_ok} of {len(sweep.cells)} cells with results.",
            "",
        ]
        items = [f"config `{c}` produced no results: {why}" for c, why in V.failed_configs(sweep).items()]
        for cell in sweep.cells:
            if cell.run is not None:
                items += [f"{cell.config_id} × {cell.scenario}: {w}" for w in validity_items(cell.run)]
        lines += _warn_lines(items + sweep.notes)
        lines += _sweep_md(sweep)
    elif kind == "run":
        run = load_run(p, requests=None)
        lines += [
            f"## {title or f'harness run `{run.name}`'}",
            "",
            f"Status **{run.summary.status}**, {run.summary.requests.completed:,} requests in "
            f"{fmt_num(run.summary.window.duration_s)} s, target `{run.summary.target.model or run.summary.target.url or '?'}`.",
            "",
        ]
        lines += _warn_lines(validity_items(run))
        lines += _run_md(run)
    else:
        raise UserError(f"{p}: neither a run directory (summary.json) nor a sweep directory (index.json)")
    code: int | None = None
    if compare_to:
        from harness.compare.metrics import resolve

        try:
            res = compare(compare_to, str(p), metrics or resolve(None), opts or Options(), baseline_root)
            lines.append(render_markdown(res))
            code = res.exit_code
        except UserError as exc:
            lines += (
                ["### ⛔ Comparison with the baseline not possible", ""] + [f"- {line}" for line in exc.lines] + [""]
            )
            code = exc.exit_code
    report = p / "report.html"
    lines.append(
        f"<sub>Full report: `{report}`"
        + (" (in the job's artifact)" if report.is_file() else " (run `harness report` to write it)")
        + "</sub>"
    )
    return "\n".join(lines).rstrip() + "\n", code
