"""Assemble summary.json from the load processes' results, telemetry and host checks.

Validity warnings say plainly when numbers should not be trusted: a saturated client, stalls
of the host inside the window, reads that coalesced several events (shared stamps), late sends
in open loop, prompt lengths the server disagrees with, missing telemetry, requests cut at the end,
and a simulated engine that fell behind its own schedule (its figures are then slower than its
model, not a property of the flags under test).
"""

from __future__ import annotations

from typing import Any, Protocol

from harness import __version__
from harness.metrics.prompt_fit import PromptFit
from harness.metrics.recorder import ALL, MetricSet
from harness.results.models.engine import EngineBlock
from harness.results.models.summary import Fleet, GroupBlock, RunSummary, Sessions, UsageCheck, Validity
from harness.results.server_timing import server_timing_block

CPU_SATURATED_PCT = 90.0
#: a share of failed requests that makes the latencies unrepresentative (they describe survivors)
FAILED_WARN_FRACTION = 0.10
#: KV cache use at or above this share of the cache is at the edge of preemption
KV_FULL_FRACTION = 0.95
#: preemptions at or above this many (and 1% of the requests) are a storm, not an accident
PREEMPTION_STORM = 5
SEND_LAG_P99_MS = 10.0
#: the simulated engine fell behind its own schedule: a share of its busy time lost for good ...
SIM_BEHIND_SHARE = 0.05
SIM_BEHIND_MIN_S = 0.05
#: ... or its steps went out late by more than a whole step at p99 (and by over 2 ms): the ITL
#: tail is then the host's, not the model's
SIM_LAG_P99_STEP_SHARE = 1.0
SIM_LAG_P99_MIN_MS = 2.0


def merge_load_results(results: list[dict[str, Any]]) -> tuple[MetricSet, dict[str, Any]]:
    """Merge per-process results losslessly: histograms add, counters sum, windows span."""
    metrics = MetricSet()
    starts, ends, warm, drains = [], [], [], []
    merged: dict[str, Any] = {
        "sent": 0,
        "cut_at_end": 0,
        "coalesced_reads": 0,
        "clock_by_request": {},
        "usage": {"n": 0, "sum_diff": 0.0, "max_diff": None, "disagree": 0, "tokenizer": None, "fit": PromptFit()},
        "cpu_max": [],
        "cpu_mean": [],
        "readers": [],
        "rss_peak": [],
        "backlog": [],
        "cpu_s": [],
        "cpu_sys_s": [],
        "warmup_requests": 0,
        "backoffs": 0,
        "backoff_s": 0.0,
        "error_lines_suppressed": {},
        "abort_reasons": [],
        "lost": [],
    }
    for res in results:
        metrics.merge_dict(res["metrics"])
        w = res.get("window", {})
        if w.get("start") is not None:
            starts.append(w["start"])
            ends.append(w.get("end") or w["start"])
        warm.append(w.get("warmup_s", 0.0))
        drains.append(w.get("drain_s", 0.0))
        merged["warmup_requests"] += w.get("warmup_requests", 0)
        merged["sent"] += res.get("sent", 0)
        merged["cut_at_end"] += res.get("cut_at_end", 0)
        merged["backoffs"] += res.get("backoffs", 0)
        merged["backoff_s"] += res.get("backoff_s", 0.0)
        for kind, n in (res.get("error_lines_suppressed") or {}).items():
            merged["error_lines_suppressed"][kind] = merged["error_lines_suppressed"].get(kind, 0) + n
        if res.get("abort_reason"):
            merged["abort_reasons"].append(res["abort_reason"])
        if res.get("lost"):  # a worker lost mid-run: the master kept what it had reported
            merged["lost"].append((res.get("worker", 0), res["lost"]))
        if res.get("fleet"):
            merged.setdefault("fleets", []).append(res["fleet"])
        t = res.get("timing", {})
        merged["coalesced_reads"] += t.get("coalesced_reads", 0)
        if t.get("gc"):
            merged.setdefault("gc", []).append(t["gc"])
        for clock, n in t.get("clock_by_request", {}).items():
            merged["clock_by_request"][clock] = merged["clock_by_request"].get(clock, 0) + n
        u = res.get("usage_check", {})
        n = u.get("requests_with_usage", 0) or 0
        usage = merged["usage"]
        if n:
            usage["n"] += n
            usage["sum_diff"] += (u.get("prompt_tokens_mean_diff") or 0.0) * n
            if u.get("max_diff") is not None:
                usage["max_diff"] = max(usage["max_diff"] or 0, u["max_diff"])
            usage["fit"].merge(PromptFit.from_dict(u.get("fit")))
        usage["disagree"] += u.get("output_tokenizer_disagreements", 0) or 0
        usage["tokenizer"] = u.get("tokenizer") or usage["tokenizer"]
        c = res.get("client", {})
        if c.get("cpu_max_pct") is not None:
            merged["cpu_max"].append(c["cpu_max_pct"])
            merged["cpu_mean"].append(c["cpu_mean_pct"])
        if c.get("reader"):
            merged["readers"].append(c["reader"])
        if c.get("rss_peak_mib") is not None:
            merged["rss_peak"].append(c["rss_peak_mib"])
        if c.get("finish_backlog_max") is not None:
            merged["backlog"].append(c["finish_backlog_max"])
        if c.get("cpu_s") is not None:
            merged["cpu_s"].append(c["cpu_s"])
            merged["cpu_sys_s"].append(c.get("cpu_sys_s") or 0.0)
    merged["window"] = {
        "start": min(starts) if starts else None,
        "end": max(ends) if ends else None,
        "duration_s": (max(ends) - min(starts)) if starts else 0.0,
        "warmup_s": max(warm) if warm else 0.0,
        "drain_s": max(drains) if drains else 0.0,
    }
    return metrics, merged


def _fleet(parts: list[dict[str, Any]], endpoints: dict[str, Any]) -> dict[str, Any]:
    """The fleet block: endpoints, policy, requests sent to each, cross-replica prefix overlap, and
    the balance of the load over the replicas (requests and prompt tokens each completed, TTFT).

    Overlap is counted per load process (each sees its own prompts): with several processes
    the blocks and shared blocks are summed, so a block two processes sent to different replicas
    is not counted as shared (a lower bound)."""
    first = parts[0]
    blocks = sum(p.get("prefix_blocks", 0) for p in parts)
    shared = sum(p.get("on_several_endpoints", 0) for p in parts)
    sent = [sum(p["sent"][i] for p in parts) for i in range(len(first["endpoints"]))]
    hit = {}
    for name, block in endpoints.items():
        tok = block.get("tokens", {})
        if tok.get("cached_input_total") is not None and tok.get("input_total"):
            hit[name] = tok["cached_input_total"] / tok["input_total"]
    return {
        "endpoints": first["endpoints"],
        "routing": first["routing"],
        "sent": sent,
        "prefix_blocks": blocks,
        "on_several_endpoints": shared,
        "prefix_overlap": (shared / blocks) if blocks else None,
        "overlap_processes": len(parts),
        "usage_cached_hit_rate": hit or None,
        "balance": _balance(first["endpoints"], endpoints),
    }


def _balance(urls: list[str], endpoints: dict[str, Any]) -> dict[str, Any]:
    """Per replica (in `urls` order): completed requests, prompt tokens, TTFT p50/p99; and how far
    the busiest replica is above the mean (max / mean: 1.0 is an even spread)."""
    blocks = [endpoints.get(u.split("//", 1)[-1], {}) for u in urls]
    requests = [int(b.get("requests", {}).get("completed", 0)) for b in blocks]
    tokens = [int(b.get("tokens", {}).get("input_total", 0)) for b in blocks]

    def ratio(xs: list[int]) -> float | None:
        mean = sum(xs) / len(xs) if xs else 0
        return max(xs) / mean if mean else None

    def ttft(b: dict[str, Any], stat: str) -> float | None:
        return ((b.get("latency_ms") or {}).get("ttft") or {}).get(stat)

    return {
        "requests": requests,
        "prompt_tokens": tokens,
        "requests_max_over_mean": ratio(requests),
        "prompt_tokens_max_over_mean": ratio(tokens),
        "ttft_p50_ms": [ttft(b, "p50") for b in blocks],
        "ttft_p99_ms": [ttft(b, "p99") for b in blocks],
    }


def _group_order(item: tuple[str, Any]) -> tuple[int, float, str]:
    """Numeric values (turn numbers, "16+") in number order, names after them alphabetically."""
    value = item[0]
    head = value.rstrip("+")
    return (0, float(head), value) if head.isdigit() else (1, 0.0, value)


class WindowSummary(Protocol):
    """A host-side meter (the stall meter) that can summarise itself over the measured window."""

    def summary(self, window_start: float | None, window_end: float | None) -> dict[str, Any]: ...


def build_summary(
    *,
    scenario: dict[str, Any],
    target: dict[str, Any],
    load: dict[str, Any],
    results: list[dict[str, Any]],
    engine: dict[str, Any] | None,
    stall_meter: WindowSummary | None,
    reconcile_warnings: list[str] | None = None,
    status: str = "complete",
    processes: int = 1,
) -> tuple[RunSummary, MetricSet]:
    metrics, merged = merge_load_results(results)
    window = merged["window"]
    duration = window["duration_s"]
    stalls = stall_meter.summary(window["start"], window["end"]) if stall_meter is not None else {}
    classes = metrics.classes
    overall = classes[ALL].summarize(duration)
    per_class = {name: cm.summarize(duration) for name, cm in sorted(classes.items()) if name != ALL}
    # groupings of the same requests (per turn, ...): one block per value, shaped like a class's
    # a LoadTestShape's stages (load.stages): each stage's rates are per its own seconds in the window
    spans = {str(st["stage"]): st.get("duration_s") for st in load.get("stages") or []}

    def seconds(dim: str, value: str) -> float:
        d = spans.get(value) if dim == "stage" else None
        return float(d) if d else duration

    groups = {
        dim: {
            value: cm.summarize(seconds(dim, value))
            for value, cm in sorted(metrics.groups(dim).items(), key=_group_order)
        }
        for dim in metrics.dimensions
    }
    usage = merged["usage"]
    completed = overall["requests"]["completed"]
    clock = merged["clock_by_request"]
    timing = {
        "clock": "kernel" if clock and set(clock) == {"kernel"} else ("user" if clock.get("user") else "kernel"),
        "requests_by_clock": clock,
        "coalesced_reads": merged["coalesced_reads"],
        "stall_meter": stalls,
        "gc": merged.get("gc", []),
    }
    client = {
        "processes": processes,
        "cpu_max_pct": max(merged["cpu_max"]) if merged["cpu_max"] else None,
        "cpu_mean_pct": (sum(merged["cpu_mean"]) / len(merged["cpu_mean"])) if merged["cpu_mean"] else None,
        "sent": merged["sent"],
        "cut_at_end": merged["cut_at_end"],
        "warmup_requests": merged["warmup_requests"],
        "backoffs": merged["backoffs"],
        "backoff_s": round(merged["backoff_s"], 3),
        "error_lines_suppressed": merged["error_lines_suppressed"],
    }
    # which stream reader each load process ran (native C or the pure-Python fallback), its peak
    # RSS and its most finished responses waiting at once; absent from runs before they existed
    if merged["readers"]:
        client["reader"] = "+".join(sorted(set(merged["readers"])))
    if merged["rss_peak"]:
        client["rss_peak_mib"] = max(merged["rss_peak"])
    if merged["backlog"]:
        client["finish_backlog_max"] = max(merged["backlog"])
    if merged["cpu_s"]:  # every load process's CPU over the window, summed; per output token below
        client["cpu_s"] = round(sum(merged["cpu_s"]), 3)
        client["cpu_sys_s"] = round(sum(merged["cpu_sys_s"]), 3)
        out = overall["tokens"]["output_total"]
        client["cpu_us_per_output_token"] = round(1e6 * client["cpu_s"] / out, 3) if out else None
    if merged["lost"]:  # distributed workers lost mid-run (what they reported is kept)
        client["lost_workers"] = sorted(k for k, _why in merged["lost"])
    usage_check = {
        "requests_with_usage": usage["n"],
        "prompt_tokens_mean_diff": (usage["sum_diff"] / usage["n"]) if usage["n"] else None,
        "max_diff": usage["max_diff"],
        "output_tokenizer_disagreements": usage["disagree"],
        "tokenizer": usage["tokenizer"],
    }
    fit = usage["fit"].solve() if usage["fit"].n == usage["n"] else None  # results of older load processes lack it
    if fit is not None:
        # the chat template's constant, tolerated and reported; a mismatch beyond it is warned
        usage_check["prompt_tokens_offset"] = round(fit["offset"], 2)
        usage_check["prompt_tokens_scale_error"] = round(fit["scale_error"], 5)
        usage_check["prompt_tokens_residual_rms"] = round(fit["residual_rms"], 2)
        usage_check["prompt_tokens_mismatch"] = usage["fit"].mismatch()
    summary = RunSummary.model_validate(
        {
            "harness_version": __version__,
            "scenario": scenario,
            "target": target,
            "window": window,
            "load": load,
            "requests": overall["requests"],
            "tokens": overall["tokens"],
            "latency_ms": overall["latency_ms"],
            "tokens_per_chunk": overall["tokens_per_chunk"],
            # cache and ttft_breakdown are written (null) in every class block of this version, though
            # ClassMetrics.summarize leaves them out when there is none (groups keep leaving them out)
            "per_class": {k: {"cache": None, "ttft_breakdown": None, **v} for k, v in per_class.items()},
            "cache": overall.get("cache"),
            "ttft_breakdown": overall.get("ttft_breakdown"),
            "server_timing": server_timing_block(classes[ALL].counts, completed, bool(merged.get("fleets"))),
            "goodput": {"overall": overall["goodput"], "per_class": {k: v["goodput"] for k, v in per_class.items()}},
            "usage_check": usage_check,
            "timing": timing,
            "client": client,
            "engine": engine or {},
            "status": status,
            "status_reason": None,
        }
    )
    if groups:
        summary.groups = {
            dim: {value: GroupBlock.model_validate(block) for value, block in values.items()}
            for dim, values in groups.items()
        }
    if merged.get("fleets"):
        cached = overall["tokens"].get("cached_input_total")
        fleet = _fleet(merged["fleets"], groups.get("endpoint", {}))
        fleet["fleet_usage_cached_hit_rate"] = (
            cached / overall["tokens"]["input_total"]
            if cached is not None and overall["tokens"]["input_total"]
            else None
        )
        summary.fleet = Fleet.model_validate(fleet)
    sessions = metrics.sessions.summarize()
    if sessions is not None:
        # the engine's hit rate over the window next to the ideal one the sessions allow
        sessions["engine_prefix_hit_rate"] = summary.engine.prefix_cache.hit_rate
        summary.sessions = Sessions.model_validate(sessions)
    if merged["abort_reasons"]:
        summary.status, summary.status_reason = "failed", merged["abort_reasons"][0]
    lost = [
        f"worker {k} was lost mid-run ({why}): the requests it finished and reported are kept, the ones it "
        f"had in flight or had not reported yet are missing"
        for k, why in sorted(merged["lost"])
    ]
    if lost and summary.status == "complete":
        summary.status, summary.status_reason = "partial", lost[0]
    warnings = lost + _validity(summary, completed, reconcile_warnings or [])
    summary.validity = Validity(ok=not warnings, warnings=warnings)
    return summary, metrics


def _validity(s: RunSummary, completed: int, extra: list[str]) -> list[str]:
    out: list[str] = []
    if completed == 0:
        out.append("no request completed in the measured window: there is nothing to report")
    cpu = s.client.cpu_max_pct
    if cpu is not None and cpu >= CPU_SATURATED_PCT:
        out.append(
            f"client saturated: a load process reached {cpu:.0f}% CPU; latencies include client queueing "
            "(use --processes N or fewer streams per process)"
        )
    stalls = s.timing.stall_meter
    if stalls.stalls_in_window:
        out.append(
            f"host stalled {stalls.stalls_in_window} time(s) in the window (max {stalls.max_stall_ms:.0f} ms): "
            "tail latencies may include time the machine was not running"
        )
    coalesced = s.timing.coalesced_reads
    chunks = s.latency_ms.get("itl_chunk")
    n_gaps = chunks.count if chunks else 0
    if n_gaps and coalesced / max(n_gaps, 1) > 0.01:
        out.append(
            f"{coalesced} reads held several SSE events ({100 * coalesced / n_gaps:.1f}% of chunk gaps): "
            "those events share one arrival stamp, so ITL is less exact (client fell behind)"
        )
    lag = s.latency_ms.get("send_lag")
    if s.load.mode == "open" and lag and lag.p99 is not None and lag.p99 > SEND_LAG_P99_MS:
        out.append(
            f"open-loop sends ran late (send lag p99 {lag.p99:.1f} ms): raise load.max_in_flight or add processes; "
            "latencies are measured from the intended send times"
        )
    out.extend(_prompt_token_warnings(s.usage_check))
    src = s.tokens.output_count_source
    if src.get("tokenizer"):
        out.append(
            f"{src['tokenizer']} request(s) had no usage from the server: output tokens counted with the tokenizer"
        )
    failed = s.requests.failed
    if completed and failed and failed / (completed + failed) >= FAILED_WARN_FRACTION:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(s.requests.errors_by_kind.items(), key=lambda kv: -kv[1]))
        out.append(
            f"{100 * failed / (completed + failed):.0f}% of measured requests failed ({kinds}): "
            "the latencies describe only the requests that completed"
        )
    out.extend(_engine_pressure(s.engine, completed + failed))
    itl = s.latency_ms.get("itl_token")
    out.extend(simulator_lag_warnings(s.engine, itl.p50 if itl else None))
    if s.client.cut_at_end:
        out.append(f"{s.client.cut_at_end} in-flight request(s) were cut when the run stopped")
    # missing engine telemetry is reported by harness.telemetry.reconcile (passed in as `extra`)
    out.extend(extra)
    return out


def _prompt_token_warnings(uc: UsageCheck) -> list[str]:
    """The server's prompt counts against the intended lengths. A constant per-request offset is
    the chat template's fixed tokens (ChatML: +9 on real vLLM) and is only reported; a warning
    needs a real mismatch: a constant too large for a template, lengths off in proportion, or
    per-request scatter (harness.metrics.prompt_fit). Runs without the fit (older load results)
    keep the old rule: a mean difference of a token or more."""
    mean_diff = uc.prompt_tokens_mean_diff
    if mean_diff is None:
        return []
    builtin = str(uc.tokenizer or "").startswith("builtin")
    hint = (
        "set workload.tokenizer to the model's tokenizer for exact lengths"
        if builtin
        else "the model's tokenizer is set, so the server tokenizes or templates the prompt differently"
    )
    mismatch = uc.prompt_tokens_mismatch
    if mismatch is None:
        if abs(mean_diff) < 1.0:
            return []
        # "counted -3990.0 prompt tokens" read as a count (audit R17): it is a difference
        return [
            f"the server's prompt token counts differ from the intended lengths by {mean_diff:+.1f} per request "
            f"on average (max {uc.max_diff}); {hint}"
        ]
    if not mismatch:
        return []
    return [
        f"the server's prompt token counts disagree with the intended lengths beyond a constant chat-template "
        f"offset ({uc.prompt_tokens_offset or 0.0:+.1f} per request): {'; '.join(mismatch)} (mean difference "
        f"{mean_diff:+.1f}, max {uc.max_diff}); {hint}"
    ]


def simulator_lag_warnings(engine: EngineBlock, itl_p50_ms: float | None = None) -> list[str]:
    """The simulated engine measures its own lag (harness/sim/engine.py); a run where it fell
    behind measured a slower simulator, not the model: on a busy host the shipped speculative
    sweep inverted its lesson with no word but "host stalled" (audit N6). The text starts with
    "the simulated engine fell behind" (tests and sweeps look for it)."""
    sim = engine.simulator
    if sim is None:
        return []
    behind = sim.behind_s
    share = sim.behind_share
    lag = sim.step_lag_ms.p99
    step = sim.mean_step_ms or itl_p50_ms  # a scripted engine has no modelled steps: its ITL
    slipped = share is not None and share >= SIM_BEHIND_SHARE and behind >= SIM_BEHIND_MIN_S
    late = lag is not None and step and lag > SIM_LAG_P99_MIN_MS and lag > SIM_LAG_P99_STEP_SHARE * step
    if not slipped and not late:
        return []
    parts = []
    if slipped and share is not None:
        parts.append(f"by {behind:.2f} s ({100 * share:.0f}% of its busy time, limit {100 * SIM_BEHIND_SHARE:.0f}%)")
    if late and lag is not None and step:
        parts.append(
            f"with steps {lag:.1f} ms late at p99 against a {step:.1f}-ms step (limit {SIM_LAG_P99_STEP_SHARE:g} step)"
        )
    return [
        f"the simulated engine fell behind its own schedule {' and '.join(parts)}: the host did not give it "
        "the CPU in time, so these timings are slower than its model; rerun on a quieter host, with fewer "
        "streams, or with a lower --sim-speed"
    ]


def _engine_pressure(engine: EngineBlock, requests: int) -> list[str]:
    """A run whose engine ran out of KV room measured preemption and recomputation, not serving:
    the audit's sweep crowned a config at KV 100 % with 61 preemptions, silently."""
    kv_max = engine.kv_usage.max
    count = engine.preemptions.count
    storm = count is not None and count >= max(PREEMPTION_STORM, 0.01 * requests)
    full = kv_max is not None and kv_max >= KV_FULL_FRACTION
    if not storm and not full:
        return []
    parts = []
    if full and kv_max is not None:
        parts.append(f"the engine's KV cache reached {100 * kv_max:.0f}%")
    if storm and count is not None:
        parts.append(f"{count:,.0f} request(s) were preempted ({engine.preemptions.per_s or 0:.2f}/s)")
    return [
        " and ".join(parts) + ": the engine ran out of KV-cache room, so latencies include waiting for and "
        "recomputing evicted requests; lower the load or max-num-seqs, or give the KV cache more memory"
    ]
