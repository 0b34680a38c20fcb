"""The report of a `harness startup` directory (startup.json): per config a stacked bar chart of the
time to ready by phase (median cold vs median warm), the min/median/max table, the engine facts,
and the trade-off table (startup saved vs steady-state throughput). Written by the same writers
as run and sweep reports (report.md, report.html)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure as MplFigure

from harness.errors import UserError
from harness.report.document import Callout, Document, Figure, Heading, Paragraph, Table, right
from harness.report.figures import PALETTE, _style
from harness.report.metrics import fmt_num
from harness.results.models.startup import PhaseStats, StartupConfig, StartupDoc
from harness.results.read import load_startup as read_startup
from harness.results.startup_phases import LABELS, PHASES


def load_startup(path: Path) -> StartupDoc:
    try:
        return read_startup(path)
    except UserError as exc:
        raise UserError(f"{path}: no readable startup.json ({exc.lines[0]})") from None


def _median(block: dict[str, PhaseStats], phase: str) -> float:
    st = block.get(phase)
    return st.median if st is not None else 0.0


def phase_figure(config: StartupConfig) -> MplFigure:
    """Stacked bars, one per start kind (cold, warm): the median of each phase, bottom to top in
    startup order; the label on top is the median time to ready."""
    fig = MplFigure(figsize=(6.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    kinds = [k for k in ("cold", "warm") if config.summary.get(k)]
    for i, phase in enumerate(PHASES):
        bottoms = [sum(_median(config.summary[k], p) for p in PHASES[:i]) for k in kinds]
        heights = [_median(config.summary[k], phase) for k in kinds]
        ax.bar(kinds, heights, bottom=bottoms, color=PALETTE[i % len(PALETTE)], label=LABELS[phase], width=0.5)
    for x, k in enumerate(kinds):
        ready = config.summary[k]["ready"]
        ax.annotate(
            f"{ready.median:.2f} s (n={ready.n})",
            (x, ready.median),
            ha="center",
            va="bottom",
            textcoords="offset points",
            xytext=(0, 3),
            fontsize=9,
        )
    ax.set_ylabel("seconds to ready (median)")
    ax.set_title(config.id, fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _style(ax)
    return fig


def _mmm(st: PhaseStats | None) -> str:
    if st is None:
        return "—"
    return f"{fmt_num(st.median)} ({fmt_num(st.min)}–{fmt_num(st.max)})"


def build_startup_report(path: Path) -> Document:
    data = load_startup(path)
    configs = data.configs
    doc = Document(
        title=f"Startup report: {data.name}",
        subtitle=f"{len(configs)} configs × ({data.cold} cold + {data.warm} warm starts) · "
        f"engine {data.engine} · `{path}`",
        kind="sweep",
    )
    failed = [f"{f.id}: {f.reason or 'failed'}" for c in configs for f in c.failed]
    warnings = [c.facts.max_model_len_warning for c in configs if c.facts.max_model_len_warning]
    if failed or data.interrupted or warnings:
        doc.add(
            Callout(
                "Read first",
                failed + warnings + (["interrupted: some starts were not made"] if data.interrupted else []),
            )
        )
    doc.add(
        Paragraph(
            "Cold starts begin with empty compilation and engine caches (a fresh cache folder per start"
            + (", model cache too" if data.cold_model else "; model files stay cached")
            + "); warm starts keep the caches of the config's last cold start. Phases come from each start's "
            "log and add up to the measured time to ready (`rest` is process start, imports and the API server)."
        )
    )
    doc.add(Heading("Time to ready by phase"))
    rows = []
    for c in configs:
        for kind in ("cold", "warm"):
            block = c.summary.get(kind)
            if block and "ready" in block:
                rows.append(
                    [c.id, kind, str(block["ready"].n), _mmm(block["ready"]), *(_mmm(block.get(p)) for p in PHASES)]
                )
    if rows:
        doc.add(
            Table(
                ["Config", "Start", "n", "Ready (s)", *(LABELS[p] for p in PHASES)],
                rows,
                caption="median (min–max) seconds over the starts",
                align=["l", "l", "r", "r", *right(len(PHASES))],
            )
        )
    trade = data.tradeoffs
    if trade:
        doc.add(Heading("Startup saved vs steady-state throughput"))
        trows = []
        for t in trade:
            trows.append(
                [
                    t.config_id,
                    t.vs,
                    fmt_num(t.cold_saved_s),
                    fmt_num(t.warm_saved_s),
                    fmt_num(t.output_tok_per_s),
                    fmt_num(t.vs_output_tok_per_s),
                    "—" if t.throughput_change is None else f"{100 * t.throughput_change:+.0f}%",
                    fmt_num(t.payback_s),
                ]
            )
        doc.add(
            Table(
                [
                    "Config",
                    "Against",
                    "Cold start saved (s)",
                    "Warm start saved (s)",
                    "Output tok/s",
                    "Against tok/s",
                    "Throughput change",
                    "Catch-up (s)",
                ],
                trows,
                caption="Saved = the other config's median time to ready minus this one's. Catch-up: seconds of full-load "
                "serving after the later-ready config is up until it has produced as many tokens. The guide: "
                "do not use startup time as the only reason to enable eager mode.",
            )
        )
    doc.add(Heading("Per config"))
    for c in configs:
        if not c.summary:
            continue
        caption = c.facts_line
        if c.steady is not None and c.steady.status == "complete":
            caption += (" · " if caption else "") + (
                f"steady state: {fmt_num(c.steady.output_tok_per_s)} output tok/s, "
                f"TTFT p50 {fmt_num(c.steady.ttft_p50_ms)} ms"
            )
        doc.add(
            Figure(
                f"startup_{_stem(c.id)}",
                f"{c.id}: time to ready by phase",
                caption or "median per phase",
                phase_figure(c),
            )
        )
    return doc


def _stem(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)[:60]


def write_startup_report(path: Path | str) -> Path:
    """report.md and report.html of a startup directory (`harness report DIR` does the same)."""
    from harness.report import write_report

    return write_report(path)
