"""vLLM (`vllm serve`): ready at the first 200 on /health (the port is bound before the engine
starts but answers nothing until the app is built); facts from the startup log lines of
ENGINES.md 2b; prefix-cache reset through the dev endpoint (needs VLLM_SERVER_DEV_MODE=1)."""

from __future__ import annotations

from harness.sweep.engines.base import KINDS, HttpEngine, fact
from harness.sweep.models import EngineSpec

VLLM_FACTS = [
    # one line since ~0.10 ("GPU" on CUDA, "CPU" on the CPU build), comma thousands separators;
    # older releases print the two halves on two lines: both forms match
    fact(r"KV cache size: ([\d,]+) tokens", "kv_cache_tokens"),
    fact(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d,.]+)x", "max_concurrency_for_tokens", "max_concurrency"),
    fact(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) s", "model_load_gib", "model_load_s"),
    fact(r"Loading model weights took ([\d.]+) GB", "model_load_gib"),
    fact(r"Available KV cache memory: ([\d.]+) GiB", "kv_cache_gib"),
    fact(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache", "kv_cache_gib"),  # CPU build
    fact(r"Loading weights took ([\d.]+) seconds", "weights_load_s"),
    fact(r"# (?:GPU|CPU) blocks: (\d+)", "num_gpu_blocks"),
    fact(r"Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB", "graph_capture_s", "graph_capture_gib"),
    fact(
        r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s(?:econds)?(?: \(compilation: ([\d.]+) s\))?",
        "init_engine_s",
        "compile_s",
    ),
    fact(r"torch\.compile takes ([\d.]+) s in total", "torch_compile_s"),
]


class VLLM(HttpEngine):
    name = "vllm"
    telemetry_profile = "vllm"
    ready_path = "/health"
    reset_path = "/reset_prefix_cache"
    facts = VLLM_FACTS
    env = {"VLLM_SERVER_DEV_MODE": "1"}  # enables /reset_prefix_cache, as `vllm bench sweep` does

    def default_command(self, spec: EngineSpec) -> list[str]:
        return ["vllm", "serve", "{model}", "--host", "{host}", "--port", "{port}"]


KINDS.add("vllm", VLLM())
