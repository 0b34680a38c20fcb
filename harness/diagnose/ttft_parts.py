"""Finding: which part of TTFT the slow requests spent their time in.

With the server's own per-request timing joined to the client's stamps (summary.json
`ttft_breakdown`, harness.metrics.ttft_parts), the p99 tail's TTFT is split into send lag,
network + HTTP, queue and prefill. A part holding at least half of it, and 50 ms or more on
average, names the limit: a queue means the engine is saturated, network + HTTP the client or the
path to the server, send lag the client itself. Prefill is what a healthy engine spends TTFT on:
no finding (the report's split shows it). Without server timing there is no finding (the report
says which parts are unknown).
"""

from __future__ import annotations

from harness.diagnose.findings import rule
from harness.results.models.diagnosis import Diagnosis, Finding
from harness.results.models.summary import RunSummary

DOMINANT = 0.5  # a part holding at least this share of the tail's TTFT names the limit...
MIN_PART_MS = (
    50.0  # ...when it is this long on average in the tail (a 10-ms queue behind one engine step is not saturation)
)

#: part -> (title, what it means, advice, guide, knobs, severity)
ADVICE: dict[str, tuple[str, str, str, str, list[str], float]] = {
    "queue": (
        "TTFT tail is queueing",
        "the engine is saturated: requests wait for a place in the batch",
        "add capacity (replicas) or lower the load; where KV usage has headroom raise --max-num-seqs toward the "
        "expected concurrency (where it does not, lower it); scale on queue depth, not GPU utilization",
        "000 Size the scheduler; 001 4.3",
        ["max_num_seqs"],
        0.7,
    ),
    "network": (
        "TTFT tail is network and HTTP",
        "the client or the network is the limit, not the engine",
        "check the client's CPU (use --processes N), run the client next to the server, and look for a proxy "
        "or router on the path; the engine answered in time",
        "",
        [],
        0.6,
    ),
    "send_lag": (
        "TTFT tail is send lag",
        "the client sent the requests late (open loop): the client is the limit",
        "add load processes (--processes N) or raise load.max_in_flight",
        "",
        [],
        0.6,
    ),
}
LABEL = {"queue": "queue", "network": "network + HTTP", "send_lag": "send lag", "prefill": "prefill"}


@rule("ttft_parts")
def _ttft_parts(summary: RunSummary, diag: Diagnosis) -> Finding | None:
    b = summary.ttft_breakdown
    tail = b.tail if b is not None else None
    if b is None or tail is None or not b.requests:
        return None
    shares = {p: v for p, v in tail.share.model_dump().items() if isinstance(v, (int, float))}
    part, top = max(shares.items(), key=lambda x: x[1], default=(None, 0.0))
    if part is None or top < DOMINANT or part not in ADVICE:
        return None
    part_ms = getattr(tail.mean_ms, part)
    if part_ms is None or part_ms < MIN_PART_MS:
        return None
    title, meaning, advice, guide, knobs, severity = ADVICE[part]
    mean_share = getattr(b.share, part)
    ttft_ms = sum(v for v in tail.mean_ms.model_dump().values() if isinstance(v, (int, float)))
    mean_txt = f" (over all timed requests {100 * mean_share:.0f}%)" if mean_share is not None else ""
    return Finding(
        id="ttft_parts",
        severity=severity,
        title=title,
        text=f"TTFT p99 is {100 * top:.0f}% {LABEL[part]}{mean_txt}, {ttft_ms:,.0f} ms in the tail on average: "
        f"{meaning}",
        advice=advice,
        guide=guide,
        knobs=knobs,
        value={
            "part": part,
            "tail_share": top,
            "mean_share": mean_share,
            "tail_ttft_ms": ttft_ms,
            "tail_shares": tail.share.model_dump(),
        },
    )
