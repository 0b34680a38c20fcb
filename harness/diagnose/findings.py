"""Findings: what the run's figures say about why the config is slow, each with the guide's advice.

One rule per kind of finding, registered by name; each reads the summary (engine block) and the
diagnosis blocks and returns a typed `Finding` (harness.results.models.diagnosis) or None. Findings are
ranked by severity; the report's first screen shows the top three, the console and the sweep's
closing table the first, and `harness tune` reads them from summary.json (`findings`).
The advice quotes the tuning guides in ../shared/reference (000: "Optimize a deployment",
001: "Optimization Migration Guide").
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from harness.registry import Registry
from harness.results.models.diagnosis import (
    Diagnosis,
    EngineLogBlock,
    Finding,
    FindingValue,
    InterferenceBlock,
    LogEvent,
    MemoryBlock,
    TimeslicesBlock,
)
from harness.results.models.summary import RunSummary

Rule = Callable[[RunSummary, Diagnosis], "Finding | None"]
RULES: Registry[Rule] = Registry("finding rule")


def rule(name: str) -> Callable[[Rule], Rule]:
    return RULES.register(name)


def log_events(diag: Diagnosis) -> dict[str, LogEvent]:
    """What the engine's log counted in the window ({} without a log, or when reading it failed)."""
    return diag.engine_log.events if isinstance(diag.engine_log, EngineLogBlock) else {}


@rule("engine_errors")
def _engine_errors(summary: RunSummary, diag: Diagnosis) -> Finding | None:
    bad = {k: v for k, v in log_events(diag).items() if k in ("oom", "cuda_error")}
    if not bad:
        return None
    k, v = next(iter(bad.items()))
    n = sum(e.count for e in bad.values())
    what = "out-of-memory" if k == "oom" else "CUDA"
    return Finding(
        id="engine_errors",
        severity=0.95,
        title=f"{what} errors in the engine log",
        text=f"{n} {what} error line(s) in the engine log during the window (first: {v.first[:120]})",
        advice="lower --gpu-memory-utilization or --max-num-seqs to leave headroom, then rerun; "
        "the numbers of this run include failed work",
        guide="000 Set the GPU memory budget",
        value={"count": n},
        knobs=["gpu_memory_utilization", "max_num_seqs"],
    )


@rule("kv_pressure")
def _kv_pressure(summary: RunSummary, diag: Diagnosis) -> Finding | None:
    eng = summary.engine
    kv_max = eng.kv_usage.max
    pre = None if eng.preemptions.count is None else float(eng.preemptions.count)
    log_pre = log_events(diag).get("preemption")
    if pre is None and log_pre is not None and log_pre.count:
        pre = float(log_pre.count)
    if kv_max is None and pre is None:
        return None
    kv_txt = f"KV usage max {kv_max:.2f}" if kv_max is not None else "KV usage unknown"
    if pre:
        # --kv-cache-memory-bytes sets the cache's size and overrides --gpu-memory-utilization: raising
        # the fraction would change nothing, so the advice names the flag in effect
        fixed = float(eng.kv_cache_memory_bytes) if eng.kv_cache_memory_bytes else None
        more = (
            f"then raise --kv-cache-memory-bytes (now {fixed / 2**30:.2f} GiB; it overrides --gpu-memory-utilization) "
            if fixed
            else "then raise --gpu-memory-utilization "
        )
        value: dict[str, FindingValue] = {
            "kv_usage_max": kv_max,
            "preemptions": pre,
            **({"kv_cache_memory_bytes": fixed} if fixed else {}),
        }
        return Finding(
            id="kv_pressure",
            severity=0.9,
            title="KV cache pressure: preemptions",
            text=f"{kv_txt} with {pre:.0f} preemptions",
            value=value,
            advice="lower --max-num-seqs first, then --max-model-len; "
            + more
            + "if the GPU has safe headroom, or use --kv-cache-dtype fp8 (test quality)",
            guide="000 Understand KV cache pressure; 001 2.1",
            knobs=[
                "max_num_seqs",
                "max_model_len",
                "kv_cache_memory_bytes" if fixed else "gpu_memory_utilization",
                "kv_cache_dtype",
            ],
        )
    if kv_max is not None and kv_max >= 0.95:
        return Finding(
            id="kv_pressure",
            severity=0.55,
            title="KV cache nearly full",
            text=f"{kv_txt}, no preemptions yet",
            value={"kv_usage_max": kv_max, "preemptions": pre or 0},
            advice="keep steady-state KV occupancy below 85%: lower --max-num-seqs before preemptions start",
            guide="001 2.1",
            knobs=["max_num_seqs"],
        )
    waiting_mean = eng.waiting.mean or 0.0
    if kv_max is not None and kv_max < 0.5 and waiting_mean >= 1.0:
        return Finding(
            id="kv_headroom",
            severity=0.3,
            title="KV headroom while requests wait",
            text=f"{kv_txt} while {waiting_mean:.1f} requests waited on average",
            value={"kv_usage_max": kv_max, "waiting_mean": waiting_mean},
            advice="KV usage below 50%: there is headroom to raise --max-num-seqs",
            guide="001 2.1",
            knobs=["max_num_seqs"],
        )
    return None


@rule("interference")
def _interference(summary: RunSummary, diag: Diagnosis) -> Finding | None:
    b = diag.interference
    if not isinstance(b, InterferenceBlock) or b.verdict not in ("interference", "mild"):
        return None
    if b.inside is None or b.outside is None:
        return None
    strong = b.verdict == "interference"
    return Finding(
        id="interference",
        severity=0.8 if strong else 0.4,
        title="long prefills stall decoding",
        text=b.message,
        value={
            "itl_p99_inside_ms": b.inside.p99_ms,
            "itl_p99_outside_ms": b.outside.p99_ms,
            "p99_ratio": b.p99_ratio,
            "spike_share_inside": b.spike_share_inside,
        },
        advice="enable chunked prefill with a 512-token budget (--enable-chunked-prefill --max-num-batched-tokens 512), "
        "or lower --max-num-batched-tokens if it is on; evaluate prefill/decode disaggregation only if "
        "the spikes stay correlated with prefill arrivals after that",
        guide="001 1.1 and 3.3; 000 Use chunked prefill",
        knobs=["enable_chunked_prefill", "max_num_batched_tokens"],
    )


@rule("recompilation")
def _recompilation(summary: RunSummary, diag: Diagnosis) -> Finding | None:
    ev = log_events(diag).get("recompilation")
    if ev is None or not ev.count:
        return None
    n = ev.count
    return Finding(
        id="recompilation",
        severity=0.85 if n >= 3 else 0.6,
        title="recompilations during serving",
        text=f"{n} recompilations during the window: shapes not covered by the CUDA-graph capture sizes",
        value={"count": n},
        advice="add those batch sizes to the capture sizes (warmup set), or lower "
        "--max-num-seqs to the largest captured size; each graph costs memory (100-300 MB per shape)",
        guide="001 2.2",
        knobs=["cuda_graph_sizes", "max_num_seqs"],
    )


@rule("memory_growth")
def _memory(summary: RunSummary, diag: Diagnosis) -> Finding | None:
    m = diag.memory
    if not isinstance(m, MemoryBlock) or not (m.grew or m.low_margin):
        return None
    sim = " (simulated)" if m.source == "simulated" else ""
    margin = f"; {m.margin_gib:.2f} GiB left before the device limit" if m.margin_gib is not None else ""
    if m.grew:
        text = f"memory grew by {m.growth_gib or 0:.2f} GiB during the run (graph pool or fragmentation){margin}{sim}"
    else:
        text = f"GPU memory peaked at {m.peak_gib or 0:.2f} GiB{margin}{sim}"
    return Finding(
        id="memory_growth",
        severity=0.75 if m.low_margin else 0.65,
        title="GPU memory grew while serving",
        text=text,
        value={"growth_gib": m.growth_gib, "peak_gib": m.peak_gib, "margin_gib": m.margin_gib},
        advice="capture the serving batch sizes at startup (no growth for unseen shapes); keep margin with a "
        "lower --gpu-memory-utilization; watch reserved vs allocated CUDA memory",
        guide="001 2.2; 000 Set the GPU memory budget",
        knobs=["cuda_graph_sizes", "gpu_memory_utilization"],
    )


@rule("drift")
def _drift(summary: RunSummary, diag: Diagnosis) -> Finding | None:
    ts = diag.timeslices
    if not isinstance(ts, TimeslicesBlock) or not ts.steady_state.drift:
        return None
    ss = ts.steady_state
    return Finding(
        id="drift",
        severity=0.6,
        title="window not in steady state",
        text=ss.message or "not in steady state",
        value={d.metric: [d.first, d.last] for d in ss.drifted},
        advice="warm the server before you record results: lengthen the warmup or the window, "
        "then compare like with like",
        guide="000 Optimize a deployment",
        knobs=[],
    )


@rule("aborts")
def _aborts(summary: RunSummary, diag: Diagnosis) -> Finding | None:
    ev = log_events(diag).get("abort")
    if ev is None or not ev.count:
        return None
    return Finding(
        id="aborts",
        severity=0.3,
        title="requests aborted",
        text=f"{ev.count} request aborts in the engine log",
        value={"count": ev.count},
        advice="aborts are client disconnects or timeouts: check the client's timeouts and the errors table",
        guide="",
        knobs=[],
    )


def findings(summary: RunSummary, diag: Diagnosis) -> list[Finding]:
    """Every rule's finding, most severe first."""
    out: list[Finding] = []
    for name in RULES:
        try:
            f = RULES.get(name)(summary, diag)
        except Exception as exc:  # a rule's bug loses its finding, never the run
            print(f"warning: finding rule {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            f = None
        if f is not None:
            out.append(f)
    out.sort(key=lambda f: -f.severity)
    return out


def headline(f: Finding) -> str:
    """One line: the finding with its number, then the guide's advice."""
    return f"{f.text}: {f.advice}"
