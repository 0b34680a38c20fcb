"""vLLM V1 (`vllm/v1/metrics/loggers.py`) plus the renamed pre-0.10 names.

Old -> current: gpu_cache_usage_perc -> kv_cache_usage_perc; gpu_prefix_cache_{queries,hits} ->
prefix_cache_{queries,hits} (v0.8 counted *blocks*, current counts tokens: the hit rate is a ratio
either way); time_per_output_token_seconds -> inter_token_latency_seconds. Current names come
first so an engine exposing both during the deprecation period is counted once.
KV capacity comes from `cache_config_info` labels (`kv_cache_size_tokens`, else
`num_gpu_blocks * block_size`), summed over `engine` (data-parallel engine cores); the same labels
say whether `--kv-cache-memory-bytes` fixed the cache's size (then `--gpu-memory-utilization`
does not apply to it, and advice must name the flag that does).
"""

from __future__ import annotations

from harness.telemetry.exposition import Snapshot
from harness.telemetry.profiles.base import PROFILES, Profile


#: the simulator's device-memory gauges (it has no NVML); read as `sim_gpu_used_bytes` and
#: `sim_gpu_total_bytes` in engine_metrics.jsonl, labelled simulated by harness.diagnose.memory
SIM_GPU = {"sim_gpu_used_bytes": "sim_gpu_memory_used_bytes", "sim_gpu_total_bytes": "sim_gpu_memory_total_bytes"}

#: the simulator's own lag (harness/sim/engine.py): read into the engine block's `simulator`
SIM_LAG_COUNTERS = {"sim_behind_s": ("sim_behind_seconds_total",), "sim_modelled_s": ("sim_modelled_seconds_total",)}
SIM_LAG_HISTOGRAMS = {"sim_step_lag": ("sim_step_lag_seconds",)}


class VllmProfile(Profile):
    def extra_gauges(self, snap: Snapshot) -> dict[str, float | None]:
        return {key: self.collapse(snap.get(name)) for key, name in SIM_GPU.items() if snap.get(name)}

    def capacity(self, snap: Snapshot) -> dict[str, float | int | None]:
        per_engine: dict[str, tuple[float | None, int | None]] = {}
        fixed: list[float] = []
        for labels, _value in snap.get("vllm_cache_config_info"):
            d = dict(labels)
            set_bytes = _num(d.get("kv_cache_memory_bytes"))
            if set_bytes:
                fixed.append(set_bytes)
            block = _num(d.get("block_size"))
            tokens = _num(d.get("kv_cache_size_tokens"))
            blocks = _num(d.get("num_gpu_blocks")) or _num(d.get("num_gpu_blocks_override"))
            if tokens is None and blocks is not None and block is not None:
                tokens = blocks * block
            per_engine[d.get("engine", "")] = (tokens, int(block) if block is not None else None)
        if not per_engine:
            return {"kv_capacity_tokens": None, "block_size": None}
        extra = {"kv_cache_memory_bytes": int(sum(fixed))} if fixed else {}
        toks = [t for t, _ in per_engine.values() if t is not None]
        blocks = [b for _, b in per_engine.values() if b is not None]
        return {
            "kv_capacity_tokens": int(sum(toks)) if toks else None,
            "block_size": blocks[0] if blocks else None,
            **extra,
        }


def _num(text: str | None) -> float | None:
    if text in (None, "", "None"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _v(*names: str) -> tuple[str, ...]:
    return tuple(f"vllm_{n}" for n in names)


VLLM = PROFILES.register("vllm")(
    VllmProfile(
        name="vllm",
        prefixes=("vllm_",),
        prom_prefix="vllm[:_]",
        gauges={
            "kv_usage": _v("kv_cache_usage_perc", "gpu_cache_usage_perc"),
            "running": _v("num_requests_running"),
            "waiting": _v("num_requests_waiting"),
        },
        counters={
            "preemptions": _v("num_preemptions_total"),
            "prefix_queries": _v(
                "prefix_cache_queries_total", "gpu_prefix_cache_queries_total", "gpu_prefix_cache_queries"
            ),
            "prefix_hits": _v("prefix_cache_hits_total", "gpu_prefix_cache_hits_total", "gpu_prefix_cache_hits"),
            "prompt_tokens": _v("prompt_tokens_total"),
            "prompt_tokens_cached": _v("prompt_tokens_cached_total"),
            "generation_tokens": _v("generation_tokens_total"),
            "requests_finished": _v("request_success_total"),
            "spec_drafts": _v("spec_decode_num_drafts_total"),
            "spec_draft_tokens": _v("spec_decode_num_draft_tokens_total"),
            "spec_accepted_tokens": _v("spec_decode_num_accepted_tokens_total"),
            **SIM_LAG_COUNTERS,
        },
        labelled_counters={
            "spec_accepted_per_pos": (_v("spec_decode_num_accepted_tokens_per_pos_total"), "position"),
        },
        histograms={
            "ttft": _v("time_to_first_token_seconds"),
            "itl": _v("inter_token_latency_seconds", "time_per_output_token_seconds"),
            "e2e": _v("e2e_request_latency_seconds"),
            "queue": _v("request_queue_time_seconds"),
            "prefill": _v("request_prefill_time_seconds"),
            "decode": _v("request_decode_time_seconds"),
            **SIM_LAG_HISTOGRAMS,
        },
        info_names=_v("cache_config_info") + tuple(SIM_GPU.values()),
    )
)
