"""SGLang (`python -m sglang.launch_server`).

- launch: `--enable-metrics`; ready when /health answers 200: the HTTP server is up during warmup
  and /health answers 503 until warmup ends (/v1/models and /model_info answer early: never used);
- /metrics: `sglang/srt/observability/metrics_collector.py` (0.5.x), below;
- startup facts from the scheduler's `max_total_num_tokens=...` line and the KV-cache, weight and
  graph-capture lines;
- serving log: retraction is its preemption;
- prefix-cache reset: POST /flush_cache; tokenize: POST /tokenize, vLLM's form (`TokenizeRequest`
  {model, prompt, add_special_tokens} -> {tokens, count, max_model_len} in
  `sglang/srt/entrypoints/openai/protocol.py`);
- flags (`SGLANG_FLAGS`, below): SGLang's own names for each guide knob, read from the argparse
  parser of the 0.5.23 wheel (`ServerArgs.add_cli_args`, fields in `sglang/srt/arg_groups/fields/`;
  every option and its arity recorded in tests/engines/data/sglang/sglang_0.5.23_options.txt, which
  tests/engines/test_flags.py checks every argv of the map against). Two knobs change sense: the
  prefix cache (RadixAttention) is on unless `--disable-radix-cache`, and chunked prefill is the
  token budget itself: `--chunked-prefill-size -1` turns it off.

Not run for real here: SGLang 0.5.23 from PyPI needs CUDA 13 packages and its CUDA kernel wheel,
so it cannot serve on this project's CPU-only CI. The log lines are checked against the f-strings
of the 0.5.23 wheel (tests/engines/data/sglang/sglang_0.5.23_startup.log), the metric names against
the families it declares (tests/engines/data/sglang/sglang_0.5.23_metric_families.txt).
"""

from __future__ import annotations

from harness.engines.parts.base import KINDS, EngineSettings, HttpEngine
from harness.engines.parts.facts import fact, int_list
from harness.engines.parts.flags import FlagMap, Knob
from harness.engines.parts.logs import LogPatterns, patterns
from harness.engines.parts.metrics import Labels, Profile, Samples
from harness.engines.vllm import VLLM_TOKENIZE

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


# ---------------------------------------------------------------- flags
# SGLang 0.5.23 (`python -m sglang.launch_server --help`; the options of ServerArgs' fields):
# - max-model-len: `--context-length` ("the model's maximum context length", default from config.json);
# - gpu-memory-utilization: `--mem-fraction-static` ("the fraction of the memory used for static
#   allocation (model weights and KV cache memory pool)"; unset, SGLang computes it from the GPU's
#   memory at start: no fixed default);
# - max-num-seqs: `--max-running-requests`;
# - max-num-batched-tokens: `--chunked-prefill-size` ("the maximum number of tokens in a chunk for the
#   chunked prefill"; unset, chosen from the GPU's memory); enable-chunked-prefill is the same flag,
#   off at -1 ("Setting this to -1 means disabling chunked prefill");
# - enable-prefix-caching: `--disable-radix-cache` (a store_true: on = the flag absent);
# - cuda-graphs: `--disable-cuda-graph` (a store_true; 0.5.23 still takes it, with a deprecation
#   warning naming `--cuda-graph-backend-{decode,prefill}=disabled`, and it disables both; earlier
#   releases know only this spelling);
# - kv-cache-dtype: `--kv-cache-dtype` (auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16, ...): FP8 is fp8_e4m3;
# - tensor-parallel-size: `--tp-size` (alias `--tensor-parallel-size`);
# - speculative-config: `--speculative-algorithm` (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, ...) with
#   the draft model and step counts as flags of their own, not one JSON config: a candidate is the
#   algorithm (`NGRAM`) or a mapping of these flags
#   (`{speculative-algorithm: EAGLE, speculative-draft-model-path: ..., speculative-num-steps: 3,
#   speculative-eagle-topk: 1, speculative-num-draft-tokens: 4}`).
SGLANG_FLAGS = FlagMap(
    "sglang",
    {
        "max-model-len": Knob("context-length"),
        "gpu-memory-utilization": Knob("mem-fraction-static"),
        "max-num-seqs": Knob("max-running-requests"),
        "max-num-batched-tokens": Knob("chunked-prefill-size"),
        "enable-chunked-prefill": Knob("chunked-prefill-size", on=None, off=-1, default_on=True),
        "enable-prefix-caching": Knob("disable-radix-cache", on=None, off=True, default_on=True),
        "cuda-graphs": Knob("disable-cuda-graph", on=None, off=True, default_on=True),
        "kv-cache-dtype": Knob("kv-cache-dtype", default="auto", try_values=("fp8_e4m3",)),
        "tensor-parallel-size": Knob("tp-size", default=1),
        "speculative-config": Knob(
            "speculative-algorithm",
            also=(
                "speculative-draft-model-path",
                "speculative-num-steps",
                "speculative-eagle-topk",
                "speculative-num-draft-tokens",
            ),
        ),
    },
)


# ---------------------------------------------------------------- the kind
class SGLang(HttpEngine):
    name = "sglang"
    ready_path = "/health"
    metrics = SGLANG_METRICS
    telemetry_profile = "sglang"
    facts = SGLANG_FACTS
    log_patterns = SGLANG_LOG
    flags = SGLANG_FLAGS
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
