"""vLLM (`vllm serve`): ready at the first 200 on /health (the port is bound before the engine
starts but answers nothing until the app is built); facts from the startup log lines of
ENGINES.md 2b and vLLM 0.32's source (the CPU build's real log is tests/sweep/data/); prefix-cache
reset through the dev endpoint (needs VLLM_SERVER_DEV_MODE=1).

Startup facts the tuning guides tell the user to check (issue 16): the attention backend, the
CUDA-graph capture sizes and mode, the final max_model_len (and whether auto-fit reduced it),
quantization and KV-cache dtype in effect, the engine version, whether the compile cache hit.
"""

from __future__ import annotations

import re
from typing import Any

from harness.sweep.engines.base import KINDS, HttpEngine, fact, int_list, last_matches
from harness.sweep.models import EngineSpec

_BOOL = {"True": True, "False": False}

VLLM_FACTS = [
    # one line since ~0.10 ("GPU" on CUDA, "CPU" on the CPU build), comma thousands separators;
    # older releases print the two halves on two lines: both forms match
    fact(r"KV cache size: ([\d,]+) tokens", "kv_cache_tokens"),
    fact(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d,.]+)x", "max_concurrency_for_tokens", "max_concurrency"),
    fact(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) s", "model_load_gib", "model_load_s"),
    fact(r"Loading model weights took ([\d.]+) GB", "model_load_gib"),
    fact(r"Available KV cache memory: ([\d.]+) GiB", "kv_cache_gib"),
    fact(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache", "kv_cache_gib"),  # CPU build
    # --kv-cache-memory-bytes (0.11+; 0.26.0 on the H200): the size is set, not profiled, and
    # gpu_memory_utilization does not apply; the free memory at start tells whether another process
    # holds part of the GPU
    fact(r"Initial free memory ([\d.]+) GiB, reserved ([\d.]+) GiB memory for KV Cache as specified by kv_cache_memory_bytes",
         "initial_free_gib", "kv_cache_gib"),
    fact(r"(reserved) [\d.]+ GiB memory for KV Cache as specified by kv_cache_memory_bytes", "kv_cache_set_by",
         convert=lambda _: "kv_cache_memory_bytes"),
    fact(r"Loading weights took ([\d.]+) seconds", "weights_load_s"),
    fact(r"Initializing model took ([\d.]+) seconds", "init_model_s"),  # CPU build: before the weights
    fact(r"# (?:GPU|CPU) blocks: (\d+)", "num_gpu_blocks"),
    fact(r"Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB", "graph_capture_s", "graph_capture_gib"),
    fact(
        r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s(?:econds)?(?: \(compilation: ([\d.]+) s)?",
        "init_engine_s",
        "compile_s",
    ),
    fact(r"torch\.compile take[sn]? ([\d.]+) s in total|torch\.compile took ([\d.]+) s in total", "torch_compile_s", "torch_compile_s"),
    fact(r"Dynamo bytecode transform time: ([\d.]+) s", "dynamo_s"),
    # the engine's own facts (issue 16)
    fact(r"vLLM API server version ([\w.+-]+)|LLM engine \(v([\w.+-]+)\)", "engine_version", "engine_version", convert=str),
    fact(r"Using (\w+) attention backend out of potential backends", "attention_backend", convert=str),
    fact(r"Using (?:AttentionBackendEnum\.)?(\w+) backend\.", "attention_backend", convert=str),
    fact(r"Using (Flash Attention|FlashInfer|Triton|XFormers|Torch SDPA|[\w ]+?) backend on V1 engine", "attention_backend", convert=str),
    fact(r"\bmax_seq_len=(\d+)", "max_model_len_configured"),
    fact(r"Auto-fit max_model_len: reduced from (\d+) to (\d+)", "max_model_len_auto_fit_from", "max_model_len"),
    fact(r"LLM engine \(v[^)]*\) with config: .*?\bquantization=([\w-]+)", "quantization", convert=str),
    fact(r"LLM engine \(v[^)]*\) with config: .*?\bkv_cache_dtype=([\w-]+)", "kv_cache_dtype", convert=str),
    fact(r"LLM engine \(v[^)]*\) with config: .*?\benforce_eager=(True|False)", "enforce_eager", convert=_BOOL.__getitem__),
    fact(r"'cudagraph_mode': <CUDAGraphMode\.(\w+)", "cudagraph_mode", convert=str),
    fact(r"'cudagraph_capture_sizes': \[([\d, ]*)\]", "cudagraph_sizes", convert=int_list),
    fact(r"Using cache directory: (\S+) for vLLM's torch\.compile", "compile_cache_dir", convert=str),
    # 0.32's AOT compile cache (the CPU build logs these, not the lines above)
    fact(r"Directly load AOT compilation from path (\S+)|saved AOT compiled function to (\S+)",
         "compile_cache_dir", "compile_cache_dir", convert=str),
    fact(r"Initial profiling/warmup run took ([\d.]+) s", "profile_run_s"),
]

_CACHE_HIT = re.compile(r"Directly load the compiled graph|Directly load AOT compilation")
_CACHE_MISS = re.compile(r"Compiling a graph for|saved AOT compiled function|Compiling model again due to a load failure")

#: the CPU build compiles during its warmup and logs no compile time: the two lines' stamps tell it
_STAMPED = r"(?m)^\(\w[\w -]* pid=\d+\) \w+ (\d\d-\d\d \d\d:\d\d:\d\d)\S* \[[^\]]*\] "
_WARMUP_START = _STAMPED + r"Warming up model for the compilation"
_WARMUP_END = _STAMPED + r"Warming up done"


def _stamp_s(stamp: str) -> float:
    """Seconds of an `MM-DD HH:MM:SS` log stamp since the start of its year (day resolution is
    enough: a warmup does not span New Year)."""
    import datetime as dt

    t = dt.datetime.strptime("2001-" + stamp, "%Y-%m-%d %H:%M:%S")
    return (t - dt.datetime(2001, 1, 1)).total_seconds()


#: tqdm bars: "(mixed prefill-decode, PIECEWISE)" (V1 model runner), "(PIECEWISE)" (0.26's V2 runner)
_CAPTURE_BAR = r"Capturing CUDA graphs \(([^,()]+)(?:, (\w+))?\):[^\r\n]*?\| *(\d+)/(\d+) \[[\d:]+<[\d:?]+, *([\d.]+)(s/it|it/s)\]"


class VLLM(HttpEngine):
    name = "vllm"
    telemetry_profile = "vllm"
    ready_path = "/health"
    reset_path = "/reset_prefix_cache"
    facts = VLLM_FACTS
    env = {"VLLM_SERVER_DEV_MODE": "1"}  # enables /reset_prefix_cache, as `vllm bench sweep` does
    cache_env = {"VLLM_CACHE_ROOT": "vllm", "TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}

    def default_command(self, spec: EngineSpec) -> list[str]:
        return ["vllm", "serve", "{model}", "--host", "{host}", "--port", "{port}"]

    def derive_facts(self, facts: dict[str, Any], log_text: str) -> None:
        # the final length: what the KV-cache line sizes concurrency for (after any auto-fit)
        if "max_model_len" not in facts and "max_concurrency_for_tokens" in facts:
            facts["max_model_len"] = facts["max_concurrency_for_tokens"]
        if facts.get("quantization") == "None":
            facts["quantization"] = None
        bars: dict[str, int] = {}
        seconds: dict[str, float] = {}
        for m in last_matches(_CAPTURE_BAR, log_text):
            key = f"{m.group(1).strip()} {m.group(2)}" if m.group(2) else m.group(1).strip()
            n, rate = int(m.group(4)), float(m.group(5))
            bars[key] = n
            if m.group(3) == m.group(4) and rate > 0:  # a finished bar: n / rate is its duration
                seconds[key] = n / rate if m.group(6) == "it/s" else n * rate
        if bars:
            facts["cudagraph_captured"] = bars
        if seconds:
            # finer than "Graph capturing finished in N secs" (whole seconds)
            facts["graph_capture_bars_s"] = round(sum(seconds.values()), 3)
        start, end = last_matches(_WARMUP_START, log_text), last_matches(_WARMUP_END, log_text)
        if start and end:
            facts["warmup_compile_s"] = max(0.0, _stamp_s(end[-1].group(1)) - _stamp_s(start[0].group(1)))
        if facts.get("enforce_eager") is True:
            facts.setdefault("cudagraph_mode", "NONE")
        if _CACHE_MISS.search(log_text):
            facts["compile_cache_hit"] = False
        elif _CACHE_HIT.search(log_text):
            facts["compile_cache_hit"] = True
        super().derive_facts(facts, log_text)
        if facts.get("cudagraph_mode") == "NONE":
            facts["cudagraph_count"] = 0


KINDS.add("vllm", VLLM())
