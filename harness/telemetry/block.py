"""The `engine` block of summary.json, built from a WindowAccumulator (or empty, with a reason).

Every key is always present; what the engine does not expose (or what telemetry could not read)
is null. Keys: profile, kv_usage, kv_capacity_tokens, block_size, preemptions, prefix_cache,
running, waiting, prompt_tokens, generation_tokens, spec_decode, gpu_memory, engine_latency_ms,
telemetry; plus `simulator` (its lag behind its own schedule) only for the simulated engine,
which alone exposes it, so a real engine's block is unchanged.
"""

from __future__ import annotations

from typing import Any

from harness.telemetry.window import WindowAccumulator

#: prefill/decode: vLLM's per-request phase times, shown beside the client's interference figures
LATENCIES = ("ttft", "itl", "e2e", "queue", "prefill", "decode")


def _none_latency() -> dict[str, Any]:
    return {"p50": None, "p99": None, "mean": None, "count": None}


def gpu_unavailable(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason}


def gpu_block(nvml: Any, acc: WindowAccumulator | None, reason: str | None) -> dict[str, Any]:
    """GPU memory over the window: NVML where it sampled, else the simulated engine's modelled
    device memory (it has no NVML; audit D20), else why there is none."""
    if nvml is not None and nvml.active:
        return nvml.block()
    gauges = acc.gauges if acc is not None else {}
    used = gauges.get("sim_gpu_used_bytes") or []
    if used:
        total = gauges.get("sim_gpu_total_bytes") or []
        tot = int(total[-1]) if total else None
        return {
            "available": True,
            "source": "simulated engine (sim_gpu_memory_used_bytes)",
            "simulated": True,
            "used_max_bytes": int(max(used)),
            "total_bytes": tot,
            "samples": len(used),
            # the shape NVML's block has (one simulated device), so readers need no special case
            "per_gpu": [{"index": 0, "name": "simulated GPU", "used_max_bytes": int(max(used)), "total_bytes": tot}],
        }
    return gpu_unavailable(reason or "no GPU memory source")


def empty_block(
    *,
    source: str = "none",
    missing_reason: str | None = None,
    profile: str | None = None,
    expected_hit_rate: float | None = None,
    gpu_memory: dict | None = None,
    scrapes: int = 0,
    extra_telemetry: dict | None = None,
) -> dict[str, Any]:
    return {
        "profile": profile,
        "kv_usage": {"mean": None, "p50": None, "p99": None, "max": None},
        "kv_capacity_tokens": None,
        "block_size": None,
        "preemptions": {"count": None, "per_s": None},
        "prefix_cache": {"queries": None, "hits": None, "hit_rate": None, "expected_hit_rate": expected_hit_rate},
        "running": {"mean": None, "max": None},
        "waiting": {"mean": None, "max": None},
        "prompt_tokens": None,
        "generation_tokens": None,
        "spec_decode": None,
        "gpu_memory": gpu_memory if gpu_memory is not None else gpu_unavailable("not sampled"),
        "engine_latency_ms": {k: _none_latency() for k in LATENCIES},
        "telemetry": {
            "source": source,
            "scrapes": scrapes,
            "missing_reason": missing_reason,
            **(extra_telemetry or {}),
        },
    }


def _int(x: float | None) -> int | None:
    return None if x is None else round(x)


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or not den:
        return None
    return num / den


#: lookups per prompt token above which the engine looked requests up again while they waited
REQUERY_RATIO = 1.5


def _requeried(acc: WindowAccumulator, queries: float | None, hits: float | None) -> dict[str, Any]:
    """vLLM counts a prefix-cache lookup each time the scheduler tries to admit a waiting request
    (kv_cache_manager.get_computed_blocks), so under queueing `prefix_cache_queries` grows far
    faster than the prompt tokens (9.2x at 64 users on the H200) and hits/queries weighs each
    request by how often it was retried. `prompt_tokens_cached` is counted once per request: when
    lookups outnumber prompt tokens by REQUERY_RATIO, the hit rate is cached / prompt tokens and
    the lookup ratio stays beside it (`lookup_hit_rate`, `lookups_per_prompt_token`)."""
    prompt, cached = acc.counter("prompt_tokens"), acc.counter("prompt_tokens_cached")
    per_token = _ratio(queries, prompt)
    if per_token is None or per_token <= REQUERY_RATIO or cached is None or not prompt:
        return {}
    return {
        "hit_rate": cached / prompt,
        "hit_rate_from": "prompt_tokens_cached",
        "lookup_hit_rate": _ratio(hits, queries),
        "lookups_per_prompt_token": per_token,
        "cached_prompt_tokens": _int(cached),
    }


def spec_decode_block(acc: WindowAccumulator) -> dict[str, Any] | None:
    drafts = acc.counter("spec_drafts")
    draft_tokens = acc.counter("spec_draft_tokens")
    accepted = acc.counter("spec_accepted_tokens")
    if drafts is not None or draft_tokens is not None or accepted is not None:
        per_pos = acc.labelled_counter("spec_accepted_per_pos")
        per_position = None
        if per_pos and drafts:
            ordered = sorted(per_pos.items(), key=lambda kv: (len(kv[0]), kv[0]))
            per_position = [v / drafts for _k, v in ordered]
        length = _ratio(accepted, drafts)
        return {
            "acceptance_rate": _ratio(accepted, draft_tokens),
            "mean_acceptance_length": None if length is None else 1.0 + length,
            "per_position": per_position,
            "drafts": _int(drafts),
            "draft_tokens": _int(draft_tokens),
            "accepted_tokens": _int(accepted),
        }
    rate = acc.gauge_stats("spec_accept_rate")["mean"]
    length = acc.gauge_stats("spec_accept_length")["mean"]
    if rate is None and length is None:
        return None
    return {"acceptance_rate": rate, "mean_acceptance_length": length, "per_position": None}


def build_block(
    acc: WindowAccumulator,
    *,
    source: str,
    scrapes: int,
    missing_reason: str | None = None,
    expected_hit_rate: float | None = None,
    gpu_memory: dict | None = None,
    extra_telemetry: dict | None = None,
    window_s: float | None = None,
) -> dict[str, Any]:
    """`window_s`: the marked window (the client's); rates use it. Default: first to last scrape."""
    dur = window_s if window_s and window_s > 0 else acc.duration_s
    block = empty_block(
        source=source,
        missing_reason=missing_reason,
        profile=acc.profile.name,
        expected_hit_rate=expected_hit_rate,
        gpu_memory=gpu_memory,
        scrapes=scrapes,
        extra_telemetry={
            "window_s": round(dur, 3),
            "scraped_span_s": round(acc.duration_s, 3),
            "counter_resets": acc.resets,
            **(extra_telemetry or {}),
        },
    )
    block["kv_usage"] = acc.gauge_stats("kv_usage", percentiles=True)
    block["kv_capacity_tokens"] = _int(acc.capacity.get("kv_capacity_tokens"))
    block["block_size"] = _int(acc.capacity.get("block_size"))
    if acc.capacity.get(
        "kv_cache_memory_bytes"
    ):  # vLLM --kv-cache-memory-bytes: the size is set, not a share of the GPU
        block["kv_cache_memory_bytes"] = _int(acc.capacity["kv_cache_memory_bytes"])
    pre = acc.counter("preemptions")
    block["preemptions"] = {"count": _int(pre), "per_s": (pre / dur) if pre is not None and dur > 0 else None}
    queries, hits = acc.counter("prefix_queries"), acc.counter("prefix_hits")
    block["prefix_cache"] = {
        "queries": _int(queries),
        "hits": _int(hits),
        "hit_rate": _ratio(hits, queries),
        "expected_hit_rate": expected_hit_rate,
        **_requeried(acc, queries, hits),
    }
    block["running"] = acc.gauge_stats("running")
    block["waiting"] = acc.gauge_stats("waiting")
    block["prompt_tokens"] = _int(acc.counter("prompt_tokens"))
    block["generation_tokens"] = _int(acc.counter("generation_tokens"))
    block["spec_decode"] = spec_decode_block(acc)
    for key in LATENCIES:
        block["engine_latency_ms"][key] = acc.histogram(key) or _none_latency()
    sim = simulator_block(acc)
    if sim is not None:  # only the simulated engine has this key
        block["simulator"] = sim
    return block


def simulator_block(acc: WindowAccumulator) -> dict[str, Any] | None:
    """How far the simulated engine fell behind its own schedule over the window (None for a real
    engine). `behind_s`: time its schedule slipped for good; `modelled_s`: the step time its cost
    model asked for; `behind_share` = behind / (behind + modelled); `step_lag_ms`: how late each
    step's tokens went out (p99 read off the simulator's buckets, with the bucket)."""
    modelled = acc.counter("sim_modelled_s")
    if modelled is None:
        return None
    behind = acc.counter("sim_behind_s") or 0.0
    lag = acc.histogram("sim_step_lag") or {}
    steps = lag.get("count") or 0
    busy = behind + modelled
    return {
        "behind_s": round(behind, 4),
        "modelled_s": round(modelled, 4),
        "behind_share": round(behind / busy, 4) if busy > 0 else None,
        "steps": steps,
        "mean_step_ms": round(modelled / steps * 1e3, 3) if steps else None,
        "step_lag_ms": {k: lag.get(k) for k in ("mean", "p50", "p99", "p99_bucket_ms")},
    }
