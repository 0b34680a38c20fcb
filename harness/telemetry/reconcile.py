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
