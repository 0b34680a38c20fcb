"""The report's diagnosis: the findings on the first screen, then the analyses' tables and plots.

Reads what harness.diagnose wrote: summary.json `findings` and `diagnosis`, timeslices.json
(per-interval figures) and interference.json (ITL spikes vs long-prefill intervals).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure as MplFigure

from harness.report.data import RunData
from harness.report.document import Block, Callout, Figure, Heading, Paragraph, Table
from harness.report.figures import PALETTE, _style
from harness.report.tables import bucket_quantile
from harness.results.models.diagnosis import (
    AnalysisError,
    EngineLogBlock,
    InterferenceBlock,
    MemoryBlock,
    TimeslicesBlock,
)


def findings_callout(run: RunData) -> Callout | None:
    """The three most important findings in words, each with its number and the guide's advice."""
    found = list(run.summary.findings or [])[:3]
    if not found:
        return None
    items = [
        f"**{f.title}**: {f.text}. Advice ({f.guide}): {f.advice}"
        if f.guide
        else f"**{f.title}**: {f.text}. {f.advice}"
        for f in found
    ]
    return Callout("Findings: what the run says about why this config is slow", items, "note")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def diagnosis_blocks(run: RunData) -> list[Block]:
    d = run.summary.diagnosis
    if not d.model_fields_set:
        return []
    blocks: list[Block] = [Heading("Diagnosis")]
    rows: list[list[str]] = [
        [name, "failed", block.error]
        for name, block in (
            ("interference", d.interference),
            ("engine log", d.engine_log),
            ("GPU memory", d.memory),
            ("steady state", d.timeslices),
        )
        if isinstance(block, AnalysisError)
    ]
    inter = d.interference if isinstance(d.interference, InterferenceBlock) else None
    if inter is not None and (inter.inside or inter.message):
        rows.append(["prefill/decode interference", inter.verdict, inter.message])
    log = d.engine_log if isinstance(d.engine_log, EngineLogBlock) else None
    if log is not None:
        ev = log.events
        text = "; ".join(f"{k} {v.count} (first: `{v.first[:100]}`)" for k, v in ev.items()) or "nothing counted"
        rows.append(
            [f"engine log ({log.scope or ''})", str(sum(v.count for v in ev.values())), log.missing_reason or text]
        )
    mem = d.memory if isinstance(d.memory, MemoryBlock) else None
    if mem is not None:
        sim = " (simulated)" if mem.source == "simulated" else ""
        rows.append(
            [
                f"GPU memory{sim}",
                f"{mem.growth_gib or 0:+.2f} GiB",
                mem.message
                or f"{mem.start_gib} -> {mem.end_gib} GiB, peak {mem.peak_gib}, margin {mem.margin_gib} GiB",
            ]
        )
    ss = d.timeslices.steady_state if isinstance(d.timeslices, TimeslicesBlock) else None
    if ss is not None:
        rows.append(
            [
                "steady state",
                "drift" if ss.drift else ("steady" if ss.checked else "not checked"),
                ss.message or ss.reason or f"{ss.slices} slices: first and last within noise",
            ]
        )
    if rows:
        blocks.append(Table(["analysis", "verdict", "what it says"], rows, align=["l", "l", "l"]))
    if inter is not None and inter.inside is not None and inter.outside is not None:
        rows2 = [
            ["inside a long prefill", str(inter.inside.count), _ms(inter.inside.p50_ms), _ms(inter.inside.p99_ms)],
            ["outside", str(inter.outside.count), _ms(inter.outside.p50_ms), _ms(inter.outside.p99_ms)],
        ]
        for key, label in (
            ("itl", "engine's own ITL histogram"),
            ("prefill", "engine: prefill time per request"),
            ("decode", "engine: decode time per request"),
        ):
            e = (inter.engine or {}).get(key)
            if e is not None and (e.p50_ms is not None or e.p50_bucket_ms):
                rows2.append(
                    [
                        label,
                        "",
                        bucket_quantile(e.model_dump(), "p50", value_key="p50_ms"),
                        bucket_quantile(e.model_dump(), "p99", value_key="p99_ms"),
                    ]
                )
        blocks.append(
            Table(
                ["ITL gaps (per chunk)", "gaps", "p50 (ms)", "p99 (ms)"],
                rows2,
                caption=f"Long prefill = prompt of {inter.long_prompt_tokens}+ tokens, from its send to its first token",
            )
        )
    fig = interference_figure(run.path)
    if fig is not None:
        blocks.append(fig)
    fig = timeslice_figure(run.path)
    if fig is not None:
        blocks.append(fig)
    return blocks


def _ms(v: Any) -> str:
    return "-" if not isinstance(v, (int, float)) else f"{v:,.1f}"


def interference_figure(root: Path) -> Figure | None:
    data = _read(root / "interference.json")
    if not isinstance(data, dict) or not data.get("prefills"):
        return None
    fig = MplFigure(figsize=(9.0, 3.6), layout="constrained")
    ax = fig.subplots()
    for i, (a, b) in enumerate(data["prefills"]):
        ax.axvspan(a, b, color=PALETTE[1], alpha=0.18, lw=0, label="long prefill running" if i == 0 else "_nolegend_")
    spikes = np.asarray([(t, v) for t, v, _inside in data.get("spikes", [])], dtype=float).reshape(-1, 2)
    if spikes.size:
        ax.scatter(spikes[:, 0], spikes[:, 1], s=8, color=PALETTE[3], label="ITL spike (gap ms)", zorder=3)
        ax.set_yscale("log")
    ax.axhline(data.get("median_ms", 0) or 1e-3, color="#7f7f7f", ls=":", lw=1, label="median gap")
    ax.set_xlabel("time since the window opened (s)")
    ax.set_ylabel("gap (ms)")
    ax.set_title("ITL spikes against long-prefill intervals", loc="left", fontsize="medium")
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False, ncol=3, borderaxespad=0.1)
    _style(ax)
    return Figure(
        "interference",
        "ITL spikes vs prefill arrivals",
        "Each dot is an inter-chunk gap above the spike threshold; shaded spans are long prompts from send to "
        "first token. Dots inside the spans are decode steps stalled by a prefill (guide 001, 1.1 and 3.3).",
        fig,
    )


def timeslice_figure(root: Path) -> Figure | None:
    data = _read(root / "timeslices.json")
    slices = (data or {}).get("slices") if isinstance(data, dict) else None
    if not slices or len(slices) < 2:
        return None
    t = np.asarray([s["t_s"] + s["duration_s"] / 2 for s in slices], dtype=float)

    def col(key: str) -> np.ndarray:
        return np.asarray([s.get(key) if isinstance(s.get(key), (int, float)) else np.nan for s in slices], dtype=float)

    fig = MplFigure(figsize=(9.0, 8.0), layout="constrained")
    axes = fig.subplots(4, 1, sharex=True)
    fig.suptitle(f"Per {data['slice_s']:g} s slice of the window")
    ax = axes[0]
    ax.plot(t, col("output_tps"), marker="o", color=PALETTE[0], label="output tokens/s")
    ax.set_ylabel("tokens/s")
    ax = axes[1]
    for key, c, lab in (("ttft_p50_ms", PALETTE[0], "TTFT p50"), ("ttft_p99_ms", PALETTE[3], "TTFT p99")):
        ax.plot(t, col(key), marker="o", color=c, label=lab)
    ax.set_ylabel("TTFT (ms)")
    ax = axes[2]
    for key, c, lab in (("itl_p50_ms", PALETTE[0], "ITL p50"), ("itl_p99_ms", PALETTE[3], "ITL p99")):
        ax.plot(t, col(key), marker="o", color=c, label=lab)
    ax.set_ylabel("ITL (ms)")
    ax = axes[3]
    for key, c, lab in (
        ("in_flight_mean", "#7f7f7f", "in flight"),
        ("waiting_mean", PALETTE[1], "waiting"),
        ("running_mean", PALETTE[2], "running"),
    ):
        v = col(key)
        if not np.all(np.isnan(v)):
            ax.plot(t, v, marker="o", color=c, label=lab)
    kv = col("kv_usage_mean")
    if not np.all(np.isnan(kv)):
        ax2 = ax.twinx()
        ax2.plot(t, 100 * kv, ls="--", color=PALETTE[4], label="KV usage %")
        ax2.set_ylabel("KV %")
    ax.set_ylabel("requests")
    ax.set_xlabel("time since the window opened (s)")
    for a in axes:
        a.legend(
            loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False, ncol=3, borderaxespad=0.1
        )
        _style(a)
    return Figure(
        "timeslices",
        "Timeslices",
        "Throughput, latency and queue per slice of the window (timeslices.json); "
        "the steady-state check compares the first and the last full slice against the slice-to-slice noise.",
        fig,
    )


def sweep_diagnosis_table(sweep: Any) -> Table | None:
    """Per config (first complete cell): ITL p99 inside vs outside long prefills, recompilations,
    memory growth, drift and the top finding; chunked prefill on shows as a smaller inside/outside gap."""
    rows = []
    seen: set[str] = set()
    for c in sweep.cells:
        if c.entry is None:
            continue
        m = c.entry.metrics
        if c.config_id in seen or (
            m.itl_p99_inside_prefill_ms is None and m.finding is None and m.recompilations is None
        ):
            continue
        seen.add(c.config_id)
        i, o = m.itl_p99_inside_prefill_ms, m.itl_p99_outside_prefill_ms
        ratio = f"{i / o:.1f}x" if i is not None and o else "-"
        rows.append(
            [
                c.config_id,
                _ms(i),
                _ms(o),
                ratio,
                "-" if m.recompilations is None else str(m.recompilations),
                "-" if m.memory_growth_gib is None else f"{m.memory_growth_gib:+.2f}",
                "drift" if m.drift else "",
                m.finding or "",
            ]
        )
    if not rows:
        return None
    return Table(
        [
            "config",
            "ITL p99 inside prefill (ms)",
            "outside (ms)",
            "gap",
            "recompiles",
            "mem growth (GiB)",
            "steady",
            "top finding",
        ],
        rows,
        caption="From each config's first complete cell (summary.json diagnosis, findings)",
        align=["l", "r", "r", "r", "r", "r", "l", "l"],
    )


def diagnosis_paragraph() -> Paragraph:
    return Paragraph(
        "From the run's own files after the window (harness.diagnose); nothing here ran during measurement."
    )
