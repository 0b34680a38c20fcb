"""summary.json `server_timing`: did the server time each request itself, and which of TTFT's
parts stay unknown (so the report and the findings never present a guess as a measurement)."""

from __future__ import annotations

from harness.client.server_timing import NOT_REPORTED
from harness.results.models.traffic import ServerTiming

PARTS = ("queue", "prefill", "network")
HOW = (
    "vLLM returns its per-request timing with --enable-per-request-metrics (0.32 has it; the final usage chunk's "
    "`metrics`); llama.cpp's llama-server returns `timings` (prefill, no queue); the built-in simulator returns "
    "vLLM's"
)
BEHIND = (
    "with several endpoints or a router in front, queue and prefill are the serving replica's own; router time, "
    "and KV transfer of a disaggregated prefill/decode deployment, are not reported separately and fall in "
    "network"
)


def server_timing_block(counts: dict[str, int], completed: int, fleet: bool) -> ServerTiming:
    sources = sorted(k.split(":", 1)[1] for k, v in counts.items() if k.startswith("server_timing:") and v)
    timed = sum(v for k, v in counts.items() if k.startswith("server_timing:"))
    if not timed:
        return ServerTiming(
            requests=completed,
            timed=0,
            unknown=list(PARTS),
            note=f"the server returned no per-request timing: TTFT is not split. {HOW}",
        )
    unknown = sorted({p for s in sources for p in NOT_REPORTED.get(s, ())})
    if "queue" in unknown:
        unknown.append("network")  # the rest cannot be told from an unreported queue
    notes = []
    if timed < completed:
        notes.append(f"{completed - timed} of {completed} completed requests carried no server timing")
    if fleet:
        notes.append(BEHIND)
    return ServerTiming(requests=completed, timed=timed, sources=sources, unknown=unknown, note="; ".join(notes))
