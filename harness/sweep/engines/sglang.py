"""SGLang (`python -m sglang.launch_server`): the HTTP server is up during warmup and /health
answers 503 until warmup ends, then 200 (/v1/models and /model_info answer early: never used).
Facts from the scheduler's `max_total_num_tokens=...` line; reset through /flush_cache.

Not run for real here: SGLang 0.5.23 from PyPI needs CUDA 13 packages and its CUDA kernel wheel,
so it cannot serve on this project's CPU-only CI. The log lines are checked against the f-strings
of the 0.5.23 wheel (tests/sweep/data/sglang_0.5.23_startup.log), the metric names against the
families it declares (tests/telemetry/data/sglang_0.5.23_metric_families.txt)."""

from __future__ import annotations

from harness.sweep.engines.base import KINDS, HttpEngine, fact, int_list
from harness.sweep.models import EngineSpec

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
    fact(r"Capture (?:target [\w ]*?)?(?:cuda|CUDA) graph end\. (?:Time elapsed: |elapsed=)([\d.]+) ?s", "graph_capture_s"),
    # issue 16 facts: the scheduler line's context_len is the final max length; the KV line its dtype;
    # the ServerArgs dump at launch holds the backend and quantization; the graph runner its batch sizes
    fact(r"context_len=(\d+)", "max_model_len"),
    fact(r"KV Cache is allocated\. dtype: (?:torch\.)?(\w+)", "kv_cache_dtype", convert=str),
    fact(r"\bkv_cache_dtype='(\w+)'", "kv_cache_dtype", convert=str),
    fact(r"\battention_backend='(\w+)'", "attention_backend", convert=str),
    fact(r"\bquantization='(\w+)'", "quantization", convert=str),
    fact(r"(?i)Capture cuda graph bs \[([\d, ]*)\]", "cudagraph_sizes", convert=int_list),
]


class SGLang(HttpEngine):
    name = "sglang"
    telemetry_profile = "sglang"
    ready_path = "/health"
    reset_path = "/flush_cache"
    facts = SGLANG_FACTS

    def default_command(self, spec: EngineSpec) -> list[str]:
        return [
            "python", "-m", "sglang.launch_server", "--model-path", "{model}",
            "--host", "{host}", "--port", "{port}", "--enable-metrics",
        ]


KINDS.add("sglang", SGLang())
