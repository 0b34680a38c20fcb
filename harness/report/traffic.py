"""Report blocks about what the traffic did to the engine: the cache outcome of every request
(per class, per turn, per endpoint, beside the ideal the workload allows) and TTFT split with the
server's own timing (a stacked bar per class, the p99 tail's split, the slowest requests).

Reads summary.json's typed blocks (harness.results.models.traffic); a part no server reported
is named as unknown, never estimated.
"""

from __future__ import annotations

from matplotlib.figure import Figure as MplFigure

from harness.report.data import RunData
from harness.report.document import Block, Callout, Figure, Heading, Paragraph, Table
from harness.report.sweep_data import SweepData
from harness.results.models.summary import ClassBlock
from harness.results.models.traffic import CacheOutcome, FleetBalance, ServerTiming, TtftBreakdown

PARTS = (
    ("send_lag", "send lag", "#7f7f7f"),
    ("network", "network + HTTP", "#1f77b4"),
    ("queue", "queue", "#d62728"),
    ("prefill", "prefill", "#2ca02c"),
)
CACHE_DIMS = (("turn", "Turn"), ("call", "Call"), ("endpoint", "Endpoint"))


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:,.1f}"


def _classes(run: RunData) -> dict[str, ClassBlock]:
    return run.summary.per_class


def _cache_row(label: str, c: CacheOutcome | None) -> list[str] | None:
    return None if c is None else _cache_line(label, c)


def _cache_line(label: str, c: CacheOutcome) -> list[str]:
    return [
        label,
        f"{c.requests_reporting:,}",
        f"{c.prompt_tokens:,}",
        f"{c.cached_tokens:,}",
        _pct(c.hit_rate),
        _pct(c.ideal_hit_rate),
    ]


def cache_table(run: RunData) -> Table | None:
    """Per class, then per turn / call kind / endpoint: the server's cached tokens beside the ideal."""
    rows: list[list[str]] = []
    classes = _classes(run)
    overall = run.summary.cache
    if overall is not None and len(classes) > 1:  # one class: its row says it all
        rows.append(_cache_line("all requests", overall))
    for name, b in classes.items():
        row = _cache_row(f"class {name}", b.cache)
        if row is not None:
            rows.append(row)
    groups = run.summary.groups or {}
    for dim, label in CACHE_DIMS:
        for value, block in (groups.get(dim) or {}).items():
            row = _cache_row(f"{label.lower()} {value}", block.cache)
            if row is not None:
                rows.append(row)
    if not rows:
        return None
    return Table(
        ["Requests", "Reporting", "Prompt tokens", "Cached tokens", "Hit rate (server)", "Ideal hit rate"],
        rows,
        caption="Prefix cache, request by request: the tokens the server said it served from its cache "
        "(usage.prompt_tokens_details.cached_tokens)",
        notes=[
            "Ideal: what a large-enough prefix cache could serve of these prompts (sessions: the history "
            "sent before; hash-block traces: blocks an earlier request carried), in whole engine blocks. "
            "A server below it evicted, or did not cache; — where the server reported no cached tokens "
            "(vLLM: --enable-prompt-tokens-details) or the workload does not say."
        ],
    )


def block_trace_table(run: RunData) -> Table | None:
    bt = run.summary.block_trace
    if bt is None:
        return None
    block = f"{bt.engine_block}" + (
        f" (the engine's: {bt.engine_block_size})" if bt.engine_block_size not in (None, bt.engine_block) else ""
    )
    rows = [
        ["Trace", f"`{bt.path}` ({bt.records:,} records, {bt.sessions:,} sessions, {bt.block_tokens}-token blocks)"],
        ["Ideal hit rate, whole trace", _pct(bt.ideal_hit_rate_trace)],
        ["Ideal hit rate, the requests sent", _pct(bt.ideal_hit_rate)],
        ["Hit rate the server reported (usage cached tokens)", _pct(bt.server_hit_rate)],
        ["Hit rate the engine counted (/metrics)", _pct(bt.engine_hit_rate)],
        ["Requests", f"{bt.requests:,}"],
        ["Engine block size the ideal is cut to", block],
    ]
    return Table(
        ["Hash-block trace replay", "Value"],
        rows,
        caption="Prefix reuse the trace allows, and what the engine made of it",
        notes=[
            "Ideal: an unbounded prefix cache, requests in timestamp order: each request's leading blocks "
            "whose whole prefix an earlier request sent. Below it: evictions, or requests sharing a new "
            "prefix that arrived before the first had been computed."
        ],
    )


def _breakdowns(run: RunData) -> dict[str, TtftBreakdown]:
    out: dict[str, TtftBreakdown] = {}
    classes = _classes(run)
    if run.summary.ttft_breakdown is not None and run.summary.ttft_breakdown.requests and len(classes) > 1:
        out["all requests"] = run.summary.ttft_breakdown
    for name, b in classes.items():
        if b.ttft_breakdown is not None and b.ttft_breakdown.requests:
            out[f"class {name}"] = b.ttft_breakdown
    return out


def ttft_parts_figure(parts: dict[str, TtftBreakdown]) -> MplFigure:
    """One stacked bar per class and view (mean TTFT, and the mean of the p99 tail)."""
    labels: list[str] = []
    values: dict[str, list[float]] = {p: [] for p, _l, _c in PARTS}
    for name, b in parts.items():
        for view, block in (("mean", b), ("p99 tail", b.tail)):
            if block is None:
                continue
            labels.append(f"{name}: {view}")
            for p, _l, _c in PARTS:
                values[p].append(max(0.0, getattr(block.mean_ms, p) or 0.0))
    fig = MplFigure(figsize=(8.0, 0.6 + 0.45 * max(1, len(labels))), layout="constrained")
    ax = fig.add_subplot()
    left = [0.0] * len(labels)
    y = list(range(len(labels)))
    for p, label, color in PARTS:
        ax.barh(y, values[p], left=left, color=color, label=label, height=0.6)
        left = [a + b for a, b in zip(left, values[p], strict=True)]
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel("time to first token (ms)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.legend(loc="lower right", fontsize="small", frameon=False, ncols=4)
    return fig


def ttft_parts_blocks(run: RunData) -> list[Block]:
    st: ServerTiming | None = run.summary.server_timing
    parts = _breakdowns(run)
    if st is None and not parts:
        return []
    blocks: list[Block] = [Heading("Where TTFT went (client stamps joined with the server's timing)")]
    if not parts:
        note = st.note if st is not None else "the server returned no per-request timing"
        unknown = ", ".join(st.unknown) if st is not None and st.unknown else "queue, prefill, network"
        blocks.append(Callout("TTFT not split", [note, f"unknown: {unknown}"], "note"))
        return blocks
    rows = []
    for name, b in parts.items():
        for view, block in (("mean", b), ("p99 tail", b.tail)):
            if block is None:
                continue
            total = sum(max(0.0, getattr(block.mean_ms, p) or 0.0) for p, _l, _c in PARTS)
            rows.append(
                [
                    name,
                    view,
                    f"{block.requests:,}",
                    _ms(total),
                    *(f"{_ms(getattr(block.mean_ms, p))} ({_pct(getattr(block.share, p))})" for p, _l, _c in PARTS),
                ]
            )
    notes = [
        "send lag + network + queue + prefill = the client's TTFT, per request: queue and prefill are the "
        "server's own figures (vLLM: queue = taken by the engine -> first scheduled, prefill = first scheduled "
        "-> first token), network is the rest (the wire both ways, HTTP, the server's frontend and detokenizer). "
        "The p99 tail: the requests whose TTFT is at or above the 99th percentile."
    ]
    if st is not None and st.note:
        notes.append(st.note)
    if st is not None and st.unknown:
        notes.append(f"Not reported by the server, so not split: {', '.join(st.unknown)}.")
    blocks.append(
        Table(
            ["Requests", "View", "n", "TTFT (ms)", *(f"{label} (ms, share)" for _p, label, _c in PARTS)],
            rows,
            caption="TTFT by part: mean over the requests the server timed, and over the slowest 1 %",
            align=["l", "l", "r", "r", "r", "r", "r", "r"],
            notes=notes,
        )
    )
    blocks.append(
        Figure(
            "ttft_parts",
            "TTFT by part",
            "Each bar is one class's mean TTFT (and its p99 tail's), "
            "split into the client's send lag, the network and HTTP, the server's queue and its prefill.",
            ttft_parts_figure(parts),
        )
    )
    slow = []
    for name, b in parts.items():
        if name == "all requests":
            continue  # the classes' slowest hold the same requests
        for r in b.slowest:
            slow.append([name, r.id, _ms(r.ttft_ms), *(_ms(getattr(r.parts_ms, p)) for p, _l, _c in PARTS)])
    if slow:
        blocks.append(
            Table(
                ["Requests", "Request id", "TTFT (ms)", *(label for _p, label, _c in PARTS)],
                slow,
                caption="The slowest requests, split (ms); their lines in requests.jsonl carry `ttft_parts_ms`",
                align=["l", "l", "r", "r", "r", "r", "r"],
            )
        )
    if st is not None and st.timed < st.requests:
        blocks.append(Paragraph(f"{st.requests - st.timed:,} of {st.requests:,} requests carried no server timing."))
    return blocks


def fleet_sweep_table(sweep: SweepData) -> Table | None:
    """A sweep whose cells ran on fleets (routing policies, replica counts): each cell's prefix hit
    rate, load balance and TTFT side by side (prefix-affinity against round-robin, ...)."""
    rows = []
    for c in sweep.cells:
        run = c.run
        f = run.summary.fleet if run is not None else None
        if run is None or f is None:
            continue
        bal = f.balance or FleetBalance()
        ttft = run.summary.latency_ms.get("ttft")
        ratio = bal.requests_max_over_mean, bal.prompt_tokens_max_over_mean
        rows.append(
            [
                c.config_id,
                c.scenario,
                str(c.repeat),
                f.routing,
                str(len(f.endpoints)),
                _pct(f.fleet_usage_cached_hit_rate),
                _pct(f.prefix_overlap),
                " / ".join(f"{n:,}" for n in bal.requests) or "—",
                "—" if ratio[0] is None else f"{ratio[0]:.2f}",
                "—" if ratio[1] is None else f"{ratio[1]:.2f}",
                _ms(getattr(ttft, "p50", None)),
                _ms(getattr(ttft, "p99", None)),
            ]
        )
    if not rows:
        return None
    return Table(
        [
            "Config",
            "Scenario",
            "Repeat",
            "Routing",
            "Replicas",
            "Prefix hit (usage)",
            "Cross-replica overlap",
            "Requests per replica",
            "Requests max/mean",
            "Prompt tokens max/mean",
            "TTFT p50",
            "TTFT p99",
        ],
        rows,
        caption="Fleets side by side: the prefix cache each routing reaches, how evenly it spreads the load, and TTFT (ms)",
        align=["l", "l", "r", "l", "r", "r", "r", "r", "r", "r", "r", "r"],
        notes=[
            "max/mean: the busiest replica's completed requests (prompt tokens) over the mean; 1.00 is an "
            "even spread. Cross-replica overlap: the share of prefix blocks sent to more than one replica."
        ],
    )
