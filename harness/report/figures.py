"""Matplotlib figures of runs and sweeps, built with the object API (no pyplot, no global state).

Each builder returns a `matplotlib.figure.Figure` whose lines and bars carry labels, so tests
can check the series before anything is rendered. Latencies arrive in nanoseconds (HDR) and are
plotted in milliseconds.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from harness.results import hdr
from harness.results.models.summary import Window

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
ALL_COLOR = "#222222"


def _style(ax: Any) -> None:
    ax.grid(True, which="major", alpha=0.3)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


# ---------------------------------------------------------------- percentile plots
@dataclass
class Series:
    label: str
    hist: hdr.Hist  # in nanoseconds
    style: str = "-"
    color: str | None = None


def percentile_figure(series: list[Series], title: str, ylabel: str = "latency (ms)") -> Figure:
    """Latency against percentile, the x axis stretched towards the tail (90, 99, 99.9, 99.99 equally
    spaced), as HdrHistogram's plotter draws it. A curve stops at the last percentile its sample
    count can support (1 - 1/n)."""
    fig = Figure(figsize=(8.0, 4.4), layout="constrained")
    ax = fig.add_subplot()
    top = 0.0
    lows: list[float] = []  # each curve's 10th percentile: where the body of its samples starts
    x_max = 0.0
    for i, s in enumerate(series):
        x, y = hdr.percentile_curve(s.hist)
        if not x.size:
            continue
        y = y / 1e6
        color = s.color or (ALL_COLOR if i == 0 else PALETTE[(i - 1) % len(PALETTE)])
        ax.plot(x, y, s.style, color=color, lw=2.0 if i == 0 else 1.5, label=f"{s.label} (n={s.hist.total:,})")
        top = max(top, float(y.max()))
        lows.append(float(s.hist.quantile(10.0)) / 1e6)
        x_max = max(x_max, float(x[-1]))
    ticks = [(x, lab) for x, lab in hdr.TAIL_TICKS if x <= max(x_max, 2.0) + 1e-9]
    ax.set_xticks([t[0] for t in ticks], [t[1] for t in ticks])
    ax.set_xlim(0, max(x_max, 2.0))
    low = min((v for v in lows if v > 0), default=0.0)
    if top > 0 and low > 0 and top / low > 30:
        ax.set_yscale("log")
        ylabel += ", log scale"
        # from the decade of the lowest curve's 10th percentile (at most 3 decades under the
        # top): zero gaps of coalesced reads (stored as 1 us) stretched the ITL axis down to
        # 1e-3 ms and squeezed the 5-200 ms band into its top third (audit N19); the few
        # samples below it sit at the curve's far left (0-10 %), under the axis
        floor = max(low, top / 1e3)
        ax.set_ylim(10 ** math.floor(math.log10(floor)), top * 1.5)
    else:
        ax.set_ylim(0, top * 1.08 if top else 1)
    ax.set_xlabel("percentile (tail stretched: each step right is 10× rarer)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _style(ax)
    if ax.get_lines():
        ax.legend(loc="upper left", fontsize="small", frameon=False)
    else:
        ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes, color="#888")
    return fig


# ---------------------------------------------------------------- over time
def _series(rows: list[dict[str, Any]], key: str, t0: float) -> tuple[np.ndarray, np.ndarray]:
    pts = [
        (float(r["t"]) - t0, float(r[key]))
        for r in rows
        if isinstance(r.get("t"), (int, float)) and isinstance(r.get(key), (int, float))
    ]
    if not pts:
        return np.zeros(0), np.zeros(0)
    arr = np.asarray(pts)
    return arr[:, 0], arr[:, 1]


def _rate(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-second rate of a cumulative counter; a counter reset (engine restart) counts as 0."""
    if t.size < 2:
        return np.zeros(0), np.zeros(0)
    dt = np.diff(t)
    dv = np.diff(v)
    ok = dt > 0
    rate = np.where(dv >= 0, dv, 0.0)[ok] / dt[ok]
    return t[1:][ok], rate


def _even(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop samples much closer to the previous one than the usual spacing (the run's final
    progress line lands a fraction of a second after the last periodic one). Tokens counted as
    requests finish over that sliver made a rate spike to several times the real throughput at
    the end of every run (audit D22); a short last interval is merged into the one before."""
    if t.size < 3:
        return t, v
    spacing = float(np.median(np.diff(t)))
    keep = [0]
    for i in range(1, t.size):
        if t[i] - t[keep[-1]] >= 0.5 * spacing:
            keep.append(i)
    if keep[-1] != t.size - 1:  # the last sample is too close: it replaces the previous kept one
        keep[-1] = t.size - 1 if len(keep) > 1 else keep[-1]
        if len(keep) == 1:
            keep.append(t.size - 1)
    idx = np.asarray(keep)
    return t[idx], v[idx]


def over_time_figure(
    engine: list[dict[str, Any]] | None,
    progress: list[dict[str, Any]] | None,
    window: Window | None = None,
    engine_missing: str = "",
) -> Figure:
    """Four stacked panels sharing the time axis: KV cache usage, running/waiting requests,
    preemptions per second, and tokens per second (engine counters and the client's count)."""
    engine = engine or []
    progress = progress or []
    starts = [float(r["t"]) for r in (*engine[:1], *progress[:1]) if isinstance(r.get("t"), (int, float))]
    t0 = min(starts) if starts else 0.0
    fig = Figure(figsize=(9.0, 9.0), layout="constrained")
    axes = fig.subplots(4, 1, sharex=True)
    fig.suptitle("Over time (seconds since the first sample)")
    # a panel's note is wrapped to the panel's width and kept out of the layout: a long reason (an
    # unreachable engine's whole connection error) once squeezed the axes to nothing and printed
    # matplotlib's "constrained_layout not applied" warning even with --quiet
    no_engine = "\n".join(
        textwrap.wrap("no engine telemetry" + (f": {engine_missing}" if engine_missing else ""), 90)[:3]
    )

    # warmup shading: progress phase "warmup", else the summary's window start
    warm_end = None
    warm = [float(r["t"]) for r in progress if r.get("phase") == "warmup" and isinstance(r.get("t"), (int, float))]
    meas = [float(r["t"]) for r in progress if r.get("phase") == "measure" and isinstance(r.get("t"), (int, float))]
    if warm and meas:
        warm_end = min(meas) - t0
    elif window is not None and window.start is not None and starts and window.start > t0:
        warm_end = window.start - t0

    # 1. KV usage
    ax = axes[0]
    t, kv = _series(engine, "kv_usage", t0)
    if t.size:
        scale = 100.0 if np.nanmax(kv) <= 1.5 else 1.0
        pct = kv * scale
        peak = float(np.nanmax(pct))
        ax.plot(t, pct, color=PALETTE[0], label="KV cache usage")
        if peak > 20:
            ax.set_ylim(0, 105)
            ax.axhline(100, color="#d62728", lw=0.8, ls=":", label="_full")
        else:  # a nearly empty cache would be a flat line on a 0-100 axis
            ax.set_ylim(0, max(peak * 1.3, 0.5))
        ax.text(0.99, 0.9, f"peak {peak:.1f} %", ha="right", va="top", transform=ax.transAxes, fontsize="small")
    else:
        ax.text(
            0.5,
            0.5,
            no_engine,
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="#888",
            fontsize="small",
            in_layout=False,
        )
        ax.set_ylim(0, 100)
    ax.set_ylabel("KV usage (%)")
    ax.set_title("KV cache usage", loc="left", fontsize="medium")

    # 2. running / waiting
    ax = axes[1]
    drawn = False
    for key, color, label in (("running", PALETTE[2], "running"), ("waiting", PALETTE[1], "waiting")):
        t, v = _series(engine, key, t0)
        if t.size:
            ax.plot(t, v, color=color, label=label, drawstyle="steps-post")
            drawn = True
    tp, inflight = _series(progress, "in_flight", t0)
    if tp.size:
        ax.plot(tp, inflight, color="#7f7f7f", ls="--", lw=1, label="in flight (client)")
        drawn = True
    if not engine:
        ax.text(
            0.5,
            0.8,
            no_engine,
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="#888",
            fontsize="small",
            in_layout=False,
        )
    ax.set_ylabel("requests")
    ax.set_title("Requests running and waiting in the engine", loc="left", fontsize="medium")
    if drawn:
        ax.legend(
            loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False, ncol=3, borderaxespad=0.1
        )

    # 3. preemptions
    ax = axes[2]
    t, v = _series(engine, "preemptions_total", t0)
    tr, rate = _rate(t, v)
    if tr.size:
        ax.plot(tr, rate, color=PALETTE[3], label="preemptions/s", drawstyle="steps-pre")
        ax.fill_between(tr, rate, step="pre", color=PALETTE[3], alpha=0.25)
        total = float(v[-1] - v[0]) if v.size else 0.0
        ax.text(
            0.99,
            0.9,
            f"{total:,.0f} in total" if total else "no preemptions",
            ha="right",
            va="top",
            transform=ax.transAxes,
            fontsize="small",
        )
        ax.set_ylim(0, max(1.0, float(rate.max()) * 1.15))
    else:
        ax.text(
            0.5,
            0.5,
            no_engine if not engine else "engine reports no preemption counter",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="#888",
            fontsize="small",
            in_layout=False,
        )
    ax.set_ylabel("preemptions/s")
    ax.set_title("Preemptions", loc="left", fontsize="medium")

    # 4. tokens/s
    ax = axes[3]
    drawn = False
    for key, color, label in (
        ("generation_tokens_total", PALETTE[0], "engine output tokens/s"),
        ("prompt_tokens_total", PALETTE[4], "engine prompt tokens/s"),
    ):
        t, v = _series(engine, key, t0)
        tr, rate = _rate(t, v)
        if tr.size:
            ax.plot(tr, rate, color=color, label=label)
            drawn = True
    t, v = _series(progress, "output_tokens", t0)
    tr, rate = _rate(*_even(t, v))
    if tr.size:
        ax.plot(tr, rate, color="#222222", ls="--", lw=1.2, label="client output tokens/s (counted as requests finish)")
        drawn = True
    ax.set_ylabel("tokens/s")
    ax.set_title("Throughput", loc="left", fontsize="medium")
    ax.set_xlabel("time (s)")
    if drawn:
        # inside the axes, under its own title: three long labels in a row above the axes ran
        # into the "Throughput" title (audit D22); headroom keeps the lines clear of the box
        ax.legend(loc="upper right", fontsize="small", frameon=True, framealpha=0.85, ncol=1, borderaxespad=0.3)
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.45)
    else:
        ax.text(0.5, 0.5, "no throughput samples", ha="center", va="center", transform=ax.transAxes, color="#888")

    for ax in axes:
        _style(ax)
        if warm_end is not None and warm_end > 0:
            ax.axvspan(0, warm_end, color="#999999", alpha=0.15, lw=0, label="_warmup")
    if warm_end is not None and warm_end > 0:
        axes[0].text(
            warm_end / 2,
            0.5,
            "warmup",
            transform=axes[0].get_xaxis_transform(),
            ha="center",
            fontsize="small",
            color="#555",
        )
    return fig


# ---------------------------------------------------------------- sweeps
@dataclass
class SweepPoint:
    config: str
    scenario: str
    throughput: float  # output tokens/s
    lat: dict[str, tuple[float | None, float | None]]  # metric -> (p50, p99) in ms
    goodput_rps: float | None
    goodput_fraction: float | None  # 0-1
    repeats: int = 1
    group: str = ""  # the scenario file; `scenario` then names the load level too
    level: str | None = None  # load level (sweep `loads`), e.g. "concurrency=16"

    @property
    def column(self) -> str:
        return self.group or self.scenario


def config_colors(configs: list[str]) -> dict[str, str]:
    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(configs)}


LAT_PANELS = (("ttft", "TTFT"), ("itl", "ITL per token"), ("e2e", "E2E latency"))


def latency_throughput_figure(
    points: list[SweepPoint], configs: list[str], scenarios: list[str], best: dict[str, str | None]
) -> Figure:
    """Grid: rows TTFT / ITL / E2E, one column per scenario file. Each config is a vertical bar from
    its p50 (circle) to its p99 (triangle) at its output throughput; the best config under the SLOs
    is ringed. With load levels (sweep `loads`) a config's points are joined in load order: its
    p50 curve solid, its p99 curve dashed, so where a config bends upward is visible."""
    colors = config_colors(configs)
    columns = list(dict.fromkeys(p.column for p in points)) or [s for s in scenarios]
    columns += [s for s in scenarios if s not in columns and not any(p.scenario == s for p in points)]
    scenarios = columns
    ncol = max(1, len(scenarios))
    fig = Figure(figsize=(min(4.6 * ncol + 1.5, 18), 9.0), layout="constrained")
    axes = np.atleast_2d(fig.subplots(len(LAT_PANELS), ncol, squeeze=False))
    fig.suptitle("Latency (p50 ● to p99 ▲) against output throughput, per config")
    for c, scenario in enumerate(scenarios):
        pts = [p for p in points if p.column == scenario]
        for r, (metric, label) in enumerate(LAT_PANELS):
            ax = axes[r][c]
            _level_curves(ax, pts, metric, colors)
            for p in pts:
                p50, p99 = p.lat.get(metric, (None, None))
                if p50 is None and p99 is None:
                    continue
                ys = [y for y in (p50, p99) if y is not None]
                color = colors[p.config]
                ax.plot([p.throughput] * len(ys), ys, "-", color=color, lw=2, alpha=0.7, label=p.config)
                if p50 is not None:
                    ax.plot([p.throughput], [p50], "o", color=color, ms=6, label="_p50")
                if p99 is not None:
                    ax.plot([p.throughput], [p99], "^", color=color, ms=7, label="_p99")
                if best.get(p.scenario) == p.config and p99 is not None:
                    ax.plot([p.throughput], [p99], "o", ms=16, mfc="none", mec="#bf8700", mew=2, label="_best")
            ys_all = [y for p in pts for y in p.lat.get(metric, (None, None)) if y is not None and y > 0]
            log = bool(ys_all) and max(ys_all) / min(ys_all) > 20  # one config far worse: keep the others readable
            if log:
                ax.set_yscale("log")
            else:
                ax.set_ylim(bottom=0)
            if r == 0:
                ax.set_title(f"scenario {scenario}", fontsize="medium")
            if c == 0 or log:
                ax.set_ylabel(f"{label} (ms{', log scale' if log else ''})")
            if r == len(LAT_PANELS) - 1:
                ax.set_xlabel("output tokens/s")
            _style(ax)
            if not pts:
                ax.text(0.5, 0.5, "no complete cells", ha="center", va="center", transform=ax.transAxes, color="#888")
    handles = [Line2D([], [], color=colors[c], lw=3, label=c) for c in configs if any(p.config == c for p in points)]
    handles += [
        Line2D([], [], marker="o", ls="", color="#444", label="p50"),
        Line2D([], [], marker="^", ls="", color="#444", label="p99"),
        Line2D([], [], marker="o", ls="", ms=12, mfc="none", mec="#bf8700", mew=2, label="best under SLO"),
    ]
    # as many columns as fit the figure's width: with one scenario column a 7-wide row of config
    # names was wider than the figure and both ends were cut off (audit D12: "-seqs=8")
    longest = max((len(str(h.get_label())) for h in handles), default=1)
    fits = int(fig.get_figwidth() * 100 / 7.5) // (longest + 6)
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=max(1, min(len(handles), 7, fits)),
        frameon=False,
        fontsize="small",
    )
    return fig


def _level_curves(ax: Any, pts: list[SweepPoint], metric: str, colors: dict[str, str]) -> None:
    """Join each config's load levels (in load order = the order the points were run)."""
    for config in dict.fromkeys(p.config for p in pts if p.level):
        mine = [p for p in pts if p.config == config and p.level]
        if len(mine) < 2:
            continue
        xs = [p.throughput for p in mine]
        for idx, style in ((0, "-"), (1, "--")):
            ys = [p.lat.get(metric, (None, None))[idx] for p in mine]
            pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
            if len(pairs) > 1:
                ax.plot(*zip(*pairs, strict=True), style, color=colors[config], lw=1.2, alpha=0.8, label="_curve")
        for p in mine:  # which point is which load: the level's value beside its p50
            y = next((v for v in p.lat.get(metric, (None, None)) if v is not None), None)
            if y is not None and p.level:
                ax.annotate(
                    _level_text(p.level),
                    (p.throughput, y),
                    textcoords="offset points",
                    xytext=(5, -9),
                    fontsize="x-small",
                    color=colors[config],
                )


def _level_text(level: str) -> str:
    """`concurrency=8` -> `8 users`, `rate=2.5` -> `2.5/s`."""
    name, _, value = level.partition("=")
    if name == "concurrency":
        return f"{value} user" + ("" if value == "1" else "s")
    return f"{value}/s" if name == "rate" else level


def goodput_figure(
    points: list[SweepPoint],
    configs: list[str],
    scenarios: list[str],
    best: dict[str, str | None],
    failed: dict[str, str],
    metric_label: str = "goodput (requests/s meeting every SLO)",
) -> Figure:
    """Grouped bars: one group per config, one bar per scenario; the share of requests meeting
    the SLO printed on each bar, the best config per scenario starred, failed configs named."""
    fig = Figure(figsize=(max(7.0, 1.6 * len(configs) * max(1, len(scenarios)) ** 0.5 + 3), 4.8), layout="constrained")
    ax = fig.add_subplot()
    n = max(1, len(scenarios))
    width = 0.8 / n
    x = np.arange(len(configs))
    top = max([p.goodput_rps or 0.0 for p in points] + [0.0])
    # one scenario at several load levels: the bars are named by level, the scenario goes in the title
    files = {sc.split(" @ ", 1)[0] for sc in scenarios}
    shared = next(iter(files)) if len(files) == 1 and all(" @ " in sc for sc in scenarios) else None
    labels = [sc.split(" @ ", 1)[1] if shared else f"scenario {sc}" for sc in scenarios]
    for j, scenario in enumerate(scenarios):
        heights = []
        for cfg in configs:
            p = next((p for p in points if p.config == cfg and p.scenario == scenario), None)
            heights.append(p.goodput_rps if p and p.goodput_rps is not None else 0.0)
        xs = x - 0.4 + width * (j + 0.5)
        bars = ax.bar(xs, heights, width * 0.92, color=PALETTE[j % len(PALETTE)], label=labels[j])
        for bar, cfg in zip(bars, configs, strict=True):
            p = next((p for p in points if p.config == cfg and p.scenario == scenario), None)
            if p is None:
                continue
            txt = f"{100 * p.goodput_fraction:.0f}%" if p.goodput_fraction is not None else ""
            if best.get(scenario) == cfg:
                txt = "★ " + txt
                bar.set_edgecolor("#000000")
                bar.set_linewidth(1.8)
            ax.text(
                bar.get_x() + bar.get_width() / 2,
                bar.get_height() + top * 0.01,
                txt,
                ha="center",
                va="bottom",
                fontsize="x-small",
            )
    for k, cfg in enumerate(configs):
        if cfg in failed:
            ax.text(
                x[k],
                top * 0.05 if top else 0.05,
                "failed to start",
                ha="center",
                va="bottom",
                rotation=90,
                color="#d62728",
                fontsize="small",
            )
    ax.set_xticks(x, configs, rotation=20 if len(configs) > 4 else 0, ha="right" if len(configs) > 4 else "center")
    ax.set_ylabel(metric_label)
    ax.set_ylim(0, top * 1.18 if top else 1)
    what = f"load level (scenario {shared})" if shared else "scenario"
    ax.set_title(
        f"Goodput per config and {what}\n★ best under the SLOs; % = share of requests meeting them", fontsize="medium"
    )
    _style(ax)
    ax.grid(False, axis="x")
    longest = max((len(lb) for lb in labels), default=10)
    fig.legend(loc="outside lower center", fontsize="small", frameon=False, ncol=max(1, min(n, 90 // (longest + 4))))
    return fig
