"""GPU memory over the window: growth beyond the level serving started at, and the margin left.

vLLM allocates its KV cache at startup, so a steady engine's memory is flat while it serves. Memory
that grows during serving is CUDA-graph pool growth for shapes not captured at startup, or
allocator fragmentation (guide 001, 2.2: "A growing gap ... indicates graph pool growth for unseen
shapes"); it eats the margin to the device limit until an allocation fails.

Samples: NVML's used memory (summed over GPUs) from engine_metrics.jsonl when the target runs on
this machine; else the simulator's `sim_gpu_memory_used_bytes` gauge (it emulates an H100's
memory, with graph-pool growth for uncaptured batch sizes), labelled `simulated`.
"""

from __future__ import annotations

from typing import Any

from harness.diagnose.base import ANALYSES, RunInputs, rnd
from harness.diagnose.timeslices import gpu_used_bytes
from harness.results.models.summary import RunSummary

GIB = float(1 << 30)
#: growth below this is noise (allocator caching, NVML granularity)
MIN_GROWTH_GIB = 0.25
#: a margin below this share of the device is flagged
LOW_MARGIN = 0.05


class Memory:
    name = "memory"

    def analyze(self, inp: RunInputs) -> dict[str, Any] | None:
        w = inp.window
        rows = [m for m in inp.engine_metrics if isinstance(m.get("t"), (int, float))]
        if w is not None:
            rows = [m for m in rows if w[0] - 1.0 <= m["t"] <= w[1] + 1.0]
        samples = [(m["t"], u, m) for m in rows if (u := gpu_used_bytes(m)) is not None]
        if len(samples) < 2:
            return None
        source = "nvml" if isinstance(samples[0][2].get("gpu_used_bytes"), list) else "simulated"
        first, last = samples[0][1], samples[-1][1]
        peak = max(u for _, u, _ in samples)
        total = _total(inp.summary, samples[-1][2])
        growth = last - first
        block: dict[str, Any] = {
            "source": source,
            "samples": len(samples),
            "start_gib": rnd(first / GIB),
            "end_gib": rnd(last / GIB),
            "peak_gib": rnd(peak / GIB),
            "growth_gib": rnd(growth / GIB),
            "total_gib": rnd(total / GIB) if total else None,
            "margin_gib": rnd((total - peak) / GIB) if total else None,
        }
        limit = max(MIN_GROWTH_GIB, 0.01 * (total or 0) / GIB)
        block["grew"] = growth / GIB >= limit
        sim = " (simulated)" if source == "simulated" else ""
        msgs = []
        if block["grew"]:
            msgs.append(f"memory grew by {growth / GIB:.2f} GiB during the run (graph pool or fragmentation){sim}")
        if total and (total - peak) / total < LOW_MARGIN:
            msgs.append(
                f"only {(total - peak) / GIB:.2f} GiB ({(total - peak) / total:.1%}) left before the device "
                f"limit of {total / GIB:.1f} GiB{sim}"
            )
        block["low_margin"] = bool(total and (total - peak) / total < LOW_MARGIN)
        if msgs:
            block["message"] = "; ".join(msgs)
        return block


def _total(summary: RunSummary, row: dict[str, Any]) -> float | None:
    gm = summary.engine.gpu_memory
    if gm.total_bytes is not None and gm.available:
        return float(gm.total_bytes)
    t = row.get("sim_gpu_total_bytes")
    return float(t) if isinstance(t, (int, float)) else None


ANALYSES.add("memory", Memory())
