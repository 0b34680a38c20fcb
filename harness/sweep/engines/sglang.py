"""SGLang (`python -m sglang.launch_server`): the HTTP server is up during warmup and /health
answers 503 until warmup ends, then 200 (/v1/models and /model_info answer early: never used).
Facts from the scheduler's `max_total_num_tokens=...` line; reset through /flush_cache."""

from __future__ import annotations

from harness.sweep.engines.base import KINDS, HttpEngine, fact
from harness.sweep.models import EngineSpec

SGLANG_FACTS = [
    fact(r"max_total_num_tokens=(\d+)", "max_total_num_tokens"),
    fact(r"max_total_num_tokens=(\d+)", "kv_cache_tokens"),
    fact(r"chunked_prefill_size=(-?\d+)", "chunked_prefill_size"),
    fact(r"max_prefill_tokens=(\d+)", "max_prefill_tokens"),
    fact(r"max_running_requests=(\d+)", "max_running_requests"),
    fact(r"context_len=(\d+)", "context_len"),
    fact(r"available_gpu_mem=([\d.]+) GB", "available_gpu_mem_gb"),
    fact(r"KV Cache is allocated\. #tokens: (\d+)", "kv_cache_tokens"),
    fact(r"Load weight end\..*?mem usage=([\d.]+) GB", "model_load_gib"),
    fact(r"Capture cuda graph end\. Time elapsed: ([\d.]+) s", "graph_capture_s"),
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
