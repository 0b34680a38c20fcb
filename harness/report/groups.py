"""Report tables of the groupings summary.json carries beside the classes (per turn, ...).

The same metric blocks as a class's, one row per value of a grouping (summary.json `groups`),
and the multi-turn sessions' block: the engine's prefix hit rate next to the ideal one.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.data import RunData
from harness.report.document import Table
from harness.results.models.summary import GroupBlock

LABELS = {"turn": "Turn", "adapter": "Adapter", "endpoint": "Endpoint", "stage": "Stage", "call": "Call"}


def _ms(block: GroupBlock, metric: str, stat: str) -> str:
    d = block.latency_ms.get(metric)
    v = getattr(d, stat, None) if d is not None else None
    return "—" if v is None else f"{v:,.1f}"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def group_tables(run: RunData) -> list[Table]:
    out: list[Table] = []
    stages = {st.stage: st for st in run.summary.load.stages or []}
    for dim, blocks in (run.summary.groups or {}).items():
        rows = []
        staged = dim == "stage"  # a LoadTestShape's stages: each with its load and its own rates
        for value, b in blocks.items():
            done = b.requests.completed
            mean_in = f"{b.tokens.input_total / done:,.0f}" if done else "—"
            good = b.goodput.fraction
            load = []
            if staged:
                st = stages.get(value)
                secs = st.duration_s if st is not None else None
                load = [
                    "—" if st is None else f"{st.users:,}",
                    "—" if secs is None else f"{secs:,.1f}",
                    f"{b.requests.rps:,.2f}" if secs else "—",
                ]
            rows.append(
                [
                    value,
                    *load,
                    f"{done:,}",
                    f"{b.requests.failed:,}",
                    mean_in,
                    _ms(b, "ttft", "p50"),
                    _ms(b, "ttft", "p99"),
                    _ms(b, "itl_token", "p50"),
                    _ms(b, "e2e", "p99"),
                    "—" if good is None else f"{100 * good:.0f} %",
                ]
            )
        label = LABELS.get(dim, dim)
        head = [
            label,
            *(["Users", "Seconds", "Requests/s"] if staged else []),
            "Completed",
            "Failed",
            "Input tokens (mean)",
            "TTFT p50",
            "TTFT p99",
            "ITL p50",
            "E2E p99",
            "Good",
        ]
        caption = (
            "Per LoadTestShape stage: its users, its seconds in the window and its own latencies (ms)"
            if staged
            else f"Per {label.lower()} (latencies in ms)"
        )
        out.append(Table(head, rows, caption=caption))
    return out


def fleet_table(run: RunData) -> Table | None:
    f = run.summary.fleet
    if f is None:
        return None
    engines = {e.endpoint: e for e in f.engines or []}
    hits = f.usage_cached_hit_rate or {}
    bal = f.balance
    rows = []

    def at(xs: Sequence[float | None] | None, i: int) -> float | None:
        return xs[i] if xs is not None and i < len(xs) else None

    def num(v: float | None, fmt: str = ",.0f") -> str:
        return "—" if v is None else format(v, fmt)

    for i, (url, sent) in enumerate(zip(f.endpoints, f.sent, strict=False)):
        e = engines.get(url)
        w = e.waiting if e is not None else None
        name = url.split("//", 1)[-1]
        rows.append(
            [
                name,
                f"{sent:,}",
                num(at(bal.requests if bal else None, i)),
                num(at(bal.prompt_tokens if bal else None, i)),
                _pct(hits.get(name)),
                _pct(e.prefix_hit_rate if e is not None else None),
                num(at(bal.ttft_p50_ms if bal else None, i), ",.1f"),
                num(at(bal.ttft_p99_ms if bal else None, i), ",.1f"),
                "—" if w is None or w.mean is None else f"{w.mean:.1f} / {w.max or 0:.0f}",
            ]
        )
    notes = [
        f"Cross-replica prefix overlap: {_pct(f.prefix_overlap)} of {f.prefix_blocks:,} "
        "prefix blocks were sent to more than one replica (what a distributed prefix cache would "
        f"deduplicate). Fleet prefix hit rate from usage: {_pct(f.fleet_usage_cached_hit_rate)}. "
        "Each replica's time series: engine_metrics.jsonl (first) and replicas/r<i>/engine_metrics.jsonl."
    ]
    if bal is not None and bal.requests_max_over_mean is not None:
        notes.append(
            f"Load balance: the busiest replica completed {bal.requests_max_over_mean:.2f}x the mean requests "
            f"and {bal.prompt_tokens_max_over_mean or 0:.2f}x the mean prompt tokens (1.00 = an even spread)."
        )
    return Table(
        [
            "Endpoint",
            "Requests sent",
            "Completed",
            "Prompt tokens",
            "Prefix hit (usage)",
            "Prefix hit (engine)",
            "TTFT p50",
            "TTFT p99",
            "Waiting mean / max",
        ],
        rows,
        caption=f"Fleet: {len(f.endpoints)} endpoints, routing {f.routing} (latencies in ms)",
        notes=notes,
    )


def sessions_table(run: RunData) -> Table | None:
    s = run.summary.sessions
    if s is None:
        return None
    dur = s.duration_s
    rows = [
        ["Sessions started / completed / cut", f"{s.started:,} / {s.completed:,} / {s.cut:,}"],
        ["Turns", f"{s.turns:,}"],
        ["Session duration p50 / p90 (s)", " / ".join("—" if v is None else f"{v:,.1f}" for v in (dur.p50, dur.p90))],
        ["Prefix cache hit rate: engine", _pct(s.engine_prefix_hit_rate)],
        ["Prefix cache hit rate: ideal for these conversations", _pct(s.ideal_prefix_hit_rate)],
    ]
    a = s.agent
    if a is not None:
        share, waits = a.share, a.waiting_s
        rows += [
            ["Agentic sessions ended / completed", f"{a.sessions:,} / {a.completed:,}"],
            [
                "Requests per session; tool calls; fan-outs (sub-agents)",
                f"{a.calls_per_session:,.1f}; {a.tool_calls:,}; {a.fan_outs:,} ({a.subagents:,})",
            ],
            *[
                [
                    f"Completed sessions' wall time waiting on {label}",
                    f"{getattr(waits, k) or 0:,.1f} s ({_pct(getattr(share, k))})",
                ]
                for k, label in (
                    ("engine", "the engine"),
                    ("tools", "tools"),
                    ("think", "the user"),
                    ("subagents", "sub-agents"),
                )
            ],
        ]
    return Table(
        ["Sessions", "Value"],
        rows,
        caption="Multi-turn sessions",
        notes=[
            "Ideal: each turn's prompt could reuse the previous turn's prompt and reply (whole 16-token blocks), "
            "turn 1 a system prompt an earlier session sent; an engine below it evicted or did not cache."
        ],
    )
