"""SGLang (`python -m sglang.launch_server`).

- launch: `--enable-metrics`; ready when /health answers 200: the HTTP server is up during warmup
  and /health answers 503 until warmup ends (/v1/models and /model_info answer early: never used);
- /metrics: `sglang/srt/observability/metrics_collector.py` (0.5.x), below;
- startup facts from the scheduler's `max_total_num_tokens=...` line and the KV-cache, weight and
  graph-capture lines;
- serving log: retraction is its preemption;
- prefix-cache reset: POST /flush_cache; tokenize: POST /tokenize in vLLM's form;
- flags: vLLM's names, as before this kind had a module of its own (SGLang spells several
  differently: --max-running-requests, --chunked-prefill-size, --mem-fraction-static; not mapped yet).

Not run for real here: SGLang 0.5.23 from PyPI needs CUDA 13 packages and its CUDA kernel wheel,
so it cannot serve on this project's CPU-only CI. The log lines are checked against the f-strings
of the 0.5.23 wheel (tests/engines/data/sglang/sglang_0.5.23_startup.log), the metric names against
the families it declares (tests/engines/data/sglang/sglang_0.5.23_metric_families.txt).
"""

from __future__ import annotations

from harness.engines.parts.base import KINDS, EngineSettings, HttpEngine
from harness.engines.parts.facts import fact, int_list
from harness.engines.parts.logs import LogPatterns, patterns
from harness.engines.parts.metrics import Labels, Profile, Samples
from harness.engines.vllm import VLLM_FLAGS, VLLM_TOKENIZE

# ---------------------------------------------------------------- startup log
SGLANG_FACTS = [
    fact(r"max_total_num_tokens=(\d+)", "max_total_num_tokens"),
    fact(r"max_total_num_tokens=(\d+)", "kv_cache_tokens"),
    fact(r"chunked_prefill_size=(-?\d+)", "chunked_prefill_size"),
    fact(r"max_prefill_tokens=(\d+)", "max_prefill_tokens"),
    fact(r"max_running_requests=(\d+)", "max_running_requests"),
    fact(r"context_len=(\d+)", "context_len"),
    fact(r"available_gpu_mem=([\d.]+) GB", "available_gpu_mem_gb"),
    fact(r"available_cpu_mem=([\d.]+) GB", "available_cpu_mem_gb"),  # the same line on the CPU backend
    # 0.5.23 puts the dtype before the count: "KV Cache is allocated. dtype: torch.bfloat16, #tokens: N"
    fact(r"KV Cache is allocated\. (?:dtype: [^,]+, )?#tokens: (\d+)", "kv_cache_tokens"),
    fact(r"Load weight end\..*?mem usage=([\d.]+) GB", "model_load_gib"),
    # older: "Capture cuda graph end. Time elapsed: 5.17 s"; 0.5.23: "Capture target decode CUDA graph
    # end. elapsed=5.17 s" (the draft model's own capture is not the target's)
    fact(
        r"Capture (?:target [\w ]*?)?(?:cuda|CUDA) graph end\. (?:Time elapsed: |elapsed=)([\d.]+) ?s",
        "graph_capture_s",
    ),
    # issue 16 facts: the scheduler line's context_len is the final max length; the KV line its dtype;
    # the ServerArgs dump at launch holds the backend and quantization; the graph runner its batch sizes
    fact(r"context_len=(\d+)", "max_model_len"),
    fact(r"KV Cache is allocated\. dtype: (?:torch\.)?(\w+)", "kv_cache_dtype", convert=str),
    fact(r"\bkv_cache_dtype='(\w+)'", "kv_cache_dtype", convert=str),
    fact(r"\battention_backend='(\w+)'", "attention_backend", convert=str),
    fact(r"\bquantization='(\w+)'", "quantization", convert=str),
    fact(r"(?i)Capture cuda graph bs \[([\d, ]*)\]", "cudagraph_sizes", convert=int_list),
]


# ---------------------------------------------------------------- /metrics
# SGLang (`sglang/srt/observability/metrics_collector.py`, 0.5.x).
#
# - KV usage: `token_usage` (max of the full/SWA/mamba pools, 0-1).
# - Preemptions: retractions (`num_retracted_requests_total`).
# - Prefix cache: hits = Δ`cached_tokens_total` (summed over `cache_source`; the `total` fallback
#   is used alone when present), queries = Δ`prompt_tokens_total` (assumes prompt tokens include
#   cached ones; both count at request finish). `cache_hit_rate` is the last batch only: unused.
# - Capacity: `max_total_num_tokens`, block size: `page_size`.
# - Speculative decoding: only gauges (`spec_accept_rate`, `spec_accept_length`), averaged over
#   the window's scrapes; no per-position data.
# - Scheduler metrics carry tp/pp/ep rank labels; ranks of one replica are collapsed with max,
#   data-parallel replicas (`dp_rank`) are summed.


class SglangProfile(Profile):
    def select(self, canonical: str, items: list[tuple[Labels, float]]) -> list[tuple[Labels, float]]:
        if canonical == "prefix_hits":
            totals = [it for it in items if dict(it[0]).get("cache_source") == "total"]
            if totals:
                return totals
        return items

    def extra_gauges(self, snap: Samples) -> dict[str, float | None]:
        out = {}
        for key, name in (
            ("spec_accept_rate", "sglang_spec_accept_rate"),
            ("spec_accept_length", "sglang_spec_accept_length"),
        ):
            items = snap.get(name)
            out[key] = self.collapse(items, mean=True) if items else None
        return out

    def capacity(self, snap: Samples) -> dict[str, float | int | None]:
        cap = self.collapse(snap.get("sglang_max_total_num_tokens"))
        page = snap.get("sglang_page_size")
        return {
            "kv_capacity_tokens": int(cap) if cap is not None else None,
            "block_size": int(page[0][1]) if page else None,
        }


def _s(*names: str) -> tuple[str, ...]:
    return tuple(f"sglang_{n}" for n in names)


SGLANG_METRICS = SglangProfile(
    name="sglang",
    prefixes=("sglang_",),
    prom_prefix="sglang[:_]",
    gauges={
        "kv_usage": _s("token_usage"),
        "running": _s("num_running_reqs"),
        "waiting": _s("num_queue_reqs"),
    },
    counters={
        "preemptions": _s("num_retracted_requests_total"),
        "prefix_queries": _s("prompt_tokens_total"),
        "prefix_hits": _s("cached_tokens_total"),
        "prompt_tokens": _s("prompt_tokens_total"),
        "generation_tokens": _s("generation_tokens_total"),
        "requests_finished": _s("num_requests_total"),
    },
    histograms={
        "ttft": _s("time_to_first_token_seconds"),
        "itl": _s("inter_token_latency_seconds"),
        "e2e": _s("e2e_request_latency_seconds"),
        "queue": _s("queue_time_seconds"),
    },
    info_names=_s("max_total_num_tokens", "page_size", "spec_accept_rate", "spec_accept_length"),
    shard_labels=frozenset({"tp_rank", "pp_rank", "moe_ep_rank"}),
)


# ---------------------------------------------------------------- serving log
# SGLang: retraction is its preemption (`KV cache pool is full. Retract requests.`, `Decode out of
# memory happened`); aborts as `Abort request`.
SGLANG_LOG = LogPatterns(
    "sglang",
    patterns(
        preemption=(r"Retract requests", r"Decode out of memory happened", r"#retracted_req"),
        abort=(r"Abort request",),
    ),
)


# ---------------------------------------------------------------- the kind
class SGLang(HttpEngine):
    name = "sglang"
    ready_path = "/health"
    metrics = SGLANG_METRICS
    telemetry_profile = "sglang"
    facts = SGLANG_FACTS
    log_patterns = SGLANG_LOG
    flags = VLLM_FLAGS
    reset_path = "/flush_cache"
    tokenize = VLLM_TOKENIZE

    def default_command(self, spec: EngineSettings) -> list[str]:
        return [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "{model}",
            "--host",
            "{host}",
            "--port",
            "{port}",
            "--enable-metrics",
        ]


KINDS.add("sglang", SGLang())
