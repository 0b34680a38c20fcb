"""Client vs engine: plain-English warnings for the summary's `validity` block.

The engine's TTFT/ITL/E2E come from its own histograms over the same window, so they are known
only to within a bucket: the true engine quantile lies in [bucket_lower, bucket_upper]. A client
percentile is called "far above" only when it exceeds the bucket's *upper* bound by more than
max(an absolute margin, 25 % of that bound) -- coarse buckets cannot raise false alarms, they only
make the check less sensitive. (Client CPU saturation is checked elsewhere.)
"""

from __future__ import annotations

#: fewer window scrapes than this -> KV/queue statistics are too thin to trust
MIN_SCRAPES = 5
#: a scrape slower than this share of the window (and than SLOW_SCRAPE_MS) blurs the window's edges
SLOW_SCRAPE_SHARE = 0.1
SLOW_SCRAPE_MS = 1000.0
REL_MARGIN = 0.25
#: (engine key, client key, quantiles, absolute margin ms, label)
CHECKS = (
    ("ttft", "ttft", ("p50", "p99"), 20.0, "TTFT"),
    ("e2e", "e2e", ("p50", "p99"), 50.0, "end-to-end latency"),
    ("itl", "itl_token", ("p50",), 5.0, "inter-token latency"),
)


def _fmt(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 10_000 else f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def reconcile(client_latency_ms: dict, engine: dict) -> list[str]:
    warnings: list[str] = []
    engine = engine or {}
    tel = engine.get("telemetry") or {}
    source = tel.get("source")
    reason = tel.get("missing_reason")
    if reason and not str(reason).startswith("telemetry disabled"):
        warnings.append(f"Engine telemetry incomplete: {reason}.")
    scrapes = tel.get("scrapes") or 0
    if source in ("direct", "prometheus") and engine.get("profile") and scrapes < MIN_SCRAPES:
        warnings.append(
            f"Only {scrapes} engine scrape(s) in the measured window: KV-usage and queue statistics rest on "
            f"too few samples; run longer or lower telemetry.interval_s."
        )
    warnings += _slow_scrapes(tel)
    latency = engine.get("engine_latency_ms") or {}
    for ekey, ckey, quantiles, abs_ms, label in CHECKS:
        eng = latency.get(ekey) or {}
        cli = (client_latency_ms or {}).get(ckey) or {}
        if not eng.get("count"):
            continue
        for q in quantiles:
            c, e = cli.get(q), eng.get(q)
            bucket = eng.get(f"{q}_bucket_ms")
            if c is None or (e is None and not bucket):
                continue
            if bucket:
                upper = bucket[1]
                if upper is None:  # engine quantile in the +Inf bucket: no upper bound to compare
                    continue
                where = (
                    f"below {_fmt(upper)} (its first bucket)"
                    if e is None
                    else f"about {_fmt(e)} (histogram bucket {_fmt(bucket[0])}-{_fmt(upper)})"
                )
            elif e is not None:
                upper = e
                where = f"about {_fmt(e)}"
            else:
                continue
            gap = c - upper
            if gap > max(abs_ms, REL_MARGIN * upper):
                warnings.append(
                    f"Client {label} {q} is {_fmt(c)} but the engine's own histogram puts it at {where}: "
                    f"at least {_fmt(gap)} per request is spent outside the engine (network, proxy or client "
                    f"overhead), so these figures describe the whole path, not the engine."
                )
    return warnings


def _slow_scrapes(tel: dict) -> list[str]:
    """A slow /metrics (audit reliability defect 16): the run no longer waits for it twice, but a
    page built somewhere inside a multi-second answer is a snapshot of an unknown moment, so the
    engine's counters (requests, tokens, preemptions, prefix hits) span a shifted, shorter window
    than the client's. Said, so nobody reconciles the two totals as if they covered one window."""
    slowest = (tel.get("scrape_ms") or {}).get("max")
    window_s = tel.get("window_s")
    if slowest is None or not window_s or slowest < max(SLOW_SCRAPE_MS, SLOW_SCRAPE_SHARE * window_s * 1000):
        return []
    span = tel.get("scraped_span_s")
    covered = f"; its counters span {span:.1f} s of the {window_s:.1f} s window" if span is not None else ""
    return [
        f"The engine's /metrics took up to {slowest / 1000:.1f} s to answer: each scrape shows the engine at "
        f"an unknown moment inside that time{covered}, so engine totals need not match the client's."
    ]


#: the engine's window counters must see between these shares of the prompt tokens the client's
#: window requests carried (server usage); outside them the counters are not this window's
COVERAGE_LOW = 0.5
COVERAGE_HIGH = 2.0
#: below this many client prompt tokens the comparison says nothing
COVERAGE_MIN_TOKENS = 256


def counter_coverage(
    engine: dict,
    client_prompt_tokens: int,
    window_start: float | None,
    window_end: float | None,
    *,
    failed: int = 0,
) -> list[str]:
    """The engine's counter deltas (prefix hits, preemptions, tokens) are differences between two
    scrapes; when a scrape is late (a busy host, a slow /metrics) or other clients share the
    engine, those deltas are not the measured window's, and a hit rate or preemption count taken
    from them silently describes something else. The prompt-token counter is the check: the
    engine counts every prompt token it admits, the client knows what its window's requests
    carried (CI on a busy box: a 1.9-s window whose counters saw 0 of 9,216 prompt tokens).
    One server only (a fleet's engine block is its first replica). `failed`: the window's failed
    requests; the engine may have admitted them, the client has no usage for them, so with any
    failure only the low side is judged."""
    tel = engine.get("telemetry") or {}
    counted = engine.get("prompt_tokens")
    if counted is None or client_prompt_tokens < COVERAGE_MIN_TOKENS:
        return []
    share = counted / client_prompt_tokens
    if COVERAGE_LOW <= share <= COVERAGE_HIGH:
        return []
    if share > COVERAGE_HIGH and failed:
        return []
    if share > COVERAGE_HIGH:
        return [
            f"The engine counted {counted:,} prompt tokens in the window, {share:.1f}x the {client_prompt_tokens:,} "
            "this run sent: other clients share this engine, so its counters (prefix-cache hits, preemptions, "
            "tokens) are not this run's alone."
        ]
    edges = []
    baseline_at, final_at = tel.get("baseline_at"), tel.get("final_at")
    if baseline_at is not None and window_start is not None:
        edges.append(f"the baseline scrape was sent {baseline_at - window_start:+.2f} s from the window's start")
    if final_at is not None and window_end is not None:
        edges.append(f"the final one {final_at - window_end:+.2f} s from its end")
    why = f" ({', '.join(edges)})" if edges else ""
    return [
        f"The engine's counters saw {counted:,} of the {client_prompt_tokens:,} prompt tokens ({share:.0%}) this "
        f"window's requests carried{why}: the scrapes that bound the window missed part of it, so the engine's "
        "prefix-cache hit rate, preemptions and token counts describe only part of the window."
    ]
