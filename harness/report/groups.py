"""Report tables of the groupings summary.json carries beside the classes (per turn, ...).

The same metric blocks as a class's, one row per value of a grouping (summary.json `groups`),
and the multi-turn sessions' block: the engine's prefix hit rate next to the ideal one.
"""

from __future__ import annotations

from typing import Any

from harness.report.data import RunData
from harness.report.document import Table
from harness.results.schema import ClassBlock

LABELS = {"turn": "Turn", "adapter": "Adapter", "endpoint": "Endpoint", "stage": "Stage", "call": "Call"}


def _ms(block: ClassBlock, metric: str, stat: str) -> str:
    d = block.latency_ms.get(metric)
    v = getattr(d, stat, None) if d is not None else None
    return "—" if v is None else f"{v:,.1f}"


def group_tables(run: RunData) -> list[Table]:
    groups: dict[str, dict[str, Any]] = getattr(run.summary, "groups", None) or {}
    out: list[Table] = []
    stages = {str(st.get("stage")): st for st in (getattr(run.summary, "load", None) or {}).get("stages") or []}
    for dim, blocks in groups.items():
        rows = []
        staged = dim == "stage"  # a LoadTestShape's stages: each with its load and its own rates
        for value, raw in blocks.items():
            b = ClassBlock.model_validate(raw)
            done = b.requests.completed
            mean_in = f"{b.tokens.input_total / done:,.0f}" if done else "—"
            good = b.goodput.get("fraction")
            load = []
            if staged:
                st = stages.get(value, {})
                secs = st.get("duration_s")
                load = ["—" if st.get("users") is None else f"{st['users']:,}", "—" if secs is None else f"{secs:,.1f}",
                        f"{b.requests.rps:,.2f}" if secs else "—"]
            rows.append([value, *load, f"{done:,}", f"{b.requests.failed:,}", mean_in, _ms(b, "ttft", "p50"),
                         _ms(b, "ttft", "p99"), _ms(b, "itl_token", "p50"), _ms(b, "e2e", "p99"),
                         "—" if good is None else f"{100 * good:.0f} %"])
        label = LABELS.get(dim, dim)
        head = [label, *(["Users", "Seconds", "Requests/s"] if staged else []), "Completed", "Failed",
                "Input tokens (mean)", "TTFT p50", "TTFT p99", "ITL p50", "E2E p99", "Good"]
        caption = ("Per LoadTestShape stage: its users, its seconds in the window and its own latencies (ms)" if staged
                   else f"Per {label.lower()} (latencies in ms)")
        out.append(Table(head, rows, caption=caption))
    return out


def fleet_table(run: RunData) -> Table | None:
    f: dict[str, Any] | None = getattr(run.summary, "fleet", None)
    if not f:
        return None

    def pct(v: Any) -> str:
        return "—" if v is None else f"{100 * v:.1f} %"

    engines = {e["endpoint"]: e for e in f.get("engines") or []}
    hits = f.get("usage_cached_hit_rate") or {}
    bal = f.get("balance") or {}
    rows = []
    for i, (url, sent) in enumerate(zip(f["endpoints"], f["sent"])):
        e = engines.get(url, {})
        w = e.get("waiting") or {}
        name = url.split("//", 1)[-1]

        def at(key: str) -> Any:
            xs = bal.get(key) or []
            return xs[i] if i < len(xs) else None

        def num(v: Any, fmt: str = ",.0f") -> str:
            return "—" if v is None else format(v, fmt)

        rows.append([name, f"{sent:,}", num(at("requests")), num(at("prompt_tokens")), pct(hits.get(name)),
                     pct(e.get("prefix_hit_rate")), num(at("ttft_p50_ms"), ",.1f"), num(at("ttft_p99_ms"), ",.1f"),
                     "—" if w.get("mean") is None else f"{w['mean']:.1f} / {w.get('max', 0):.0f}"])
    notes = [f"Cross-replica prefix overlap: {pct(f.get('prefix_overlap'))} of {f.get('prefix_blocks', 0):,} "
             "prefix blocks were sent to more than one replica (what a distributed prefix cache would "
             f"deduplicate). Fleet prefix hit rate from usage: {pct(f.get('fleet_usage_cached_hit_rate'))}. "
             "Each replica's time series: engine_metrics.jsonl (first) and replicas/r<i>/engine_metrics.jsonl."]
    if bal.get("requests_max_over_mean") is not None:
        notes.append(f"Load balance: the busiest replica completed {bal['requests_max_over_mean']:.2f}x the mean requests "
                     f"and {bal.get('prompt_tokens_max_over_mean') or 0:.2f}x the mean prompt tokens (1.00 = an even spread).")
    return Table(["Endpoint", "Requests sent", "Completed", "Prompt tokens", "Prefix hit (usage)", "Prefix hit (engine)",
                  "TTFT p50", "TTFT p99", "Waiting mean / max"], rows,
                 caption=f"Fleet: {len(f['endpoints'])} endpoints, routing {f['routing']} (latencies in ms)", notes=notes)


def sessions_table(run: RunData) -> Table | None:
    s: dict[str, Any] | None = getattr(run.summary, "sessions", None)
    if not s:
        return None

    def pct(v: Any) -> str:
        return "—" if v is None else f"{100 * v:.1f} %"

    dur = s.get("duration_s") or {}
    rows = [
        ["Sessions started / completed / cut", f"{s.get('started', 0):,} / {s.get('completed', 0):,} / {s.get('cut', 0):,}"],
        ["Turns", f"{s.get('turns', 0):,}"],
        ["Session duration p50 / p90 (s)", " / ".join("—" if dur.get(k) is None else f"{dur[k]:,.1f}" for k in ("p50", "p90"))],
        ["Prefix cache hit rate: engine", pct(s.get("engine_prefix_hit_rate"))],
        ["Prefix cache hit rate: ideal for these conversations", pct(s.get("ideal_prefix_hit_rate"))],
    ]
    a = s.get("agent") or {}
    if a:
        share, waits = a.get("share") or {}, a.get("waiting_s") or {}
        rows += [
            ["Agentic sessions ended / completed", f"{a.get('sessions', 0):,} / {a.get('completed', 0):,}"],
            ["Requests per session; tool calls; fan-outs (sub-agents)",
             f"{a.get('calls_per_session', 0):,.1f}; {a.get('tool_calls', 0):,}; {a.get('fan_outs', 0):,} ({a.get('subagents', 0):,})"],
            *[[f"Completed sessions' wall time waiting on {label}", f"{waits.get(k) or 0:,.1f} s ({pct(share.get(k))})"]
              for k, label in (("engine", "the engine"), ("tools", "tools"), ("think", "the user"), ("subagents", "sub-agents"))],
        ]
    return Table(["Sessions", "Value"], rows, caption="Multi-turn sessions", notes=[
        "Ideal: each turn's prompt could reuse the previous turn's prompt and reply (whole 16-token blocks), "
        "turn 1 a system prompt an earlier session sent; an engine below it evicted or did not cache."])
