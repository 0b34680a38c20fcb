"""vLLM (`vllm serve`), the engine the tuning guides are written for.

- launch: `vllm serve {model}` with VLLM_SERVER_DEV_MODE=1 (enables the cache reset endpoint, as
  `vllm bench sweep` does); a cold start empties VLLM_CACHE_ROOT besides the compile caches;
- ready at the first 200 on /health (the port is bound before the engine starts but answers
  nothing until the app is built);
- /metrics: the V1 names (`vllm/v1/metrics/loggers.py`) plus the renamed pre-0.10 ones, below;
- startup facts from the log lines of ENGINES.md 2b and vLLM 0.26/0.32's source (real logs of the
  CPU build and of 0.26.0 on an H200 are in tests/engines/data/vllm/);
- serving log: V0's preemption lines, aborts, recompiles outside the capture sizes;
- flags: vLLM's own names are the guides' (and every other kind's that takes vLLM's names); each
  is an option of `vllm serve` 0.32.0 (its parser's options recorded in
  tests/engines/data/vllm/vllm_0.32.0_serve_options.txt, which tests/engines/test_flags.py checks
  every argv of the map against), the FP8 KV cache is `--kv-cache-dtype fp8`, the memory fraction's
  default 0.92 (`CacheConfig.gpu_memory_utilization`);
- prefix-cache reset: POST /reset_prefix_cache (dev mode); tokenize: POST /tokenize.

Startup facts the tuning guides tell the user to check (issue 16): the attention backend, the
CUDA-graph capture sizes and mode, the final max_model_len (and whether auto-fit reduced it),
quantization and KV-cache dtype in effect, the engine version, whether the compile cache hit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from harness.engines.parts.base import KINDS, EngineSettings, HttpEngine, Tokenize
from harness.engines.parts.facts import fact, int_list, last_matches
from harness.engines.parts.flags import FlagMap, Knob
from harness.engines.parts.logs import LogPatterns, patterns
from harness.engines.parts.metrics import Profile, Samples

_BOOL = {"True": True, "False": False}


# ---------------------------------------------------------------- startup log
VLLM_FACTS = [
    # one line since ~0.10 ("GPU" on CUDA, "CPU" on the CPU build), comma thousands separators;
    # older releases print the two halves on two lines: both forms match
    fact(r"KV cache size: ([\d,]+) tokens", "kv_cache_tokens"),
    fact(
        r"Maximum concurrency for ([\d,]+) tokens per request: ([\d,.]+)x",
        "max_concurrency_for_tokens",
        "max_concurrency",
    ),
    fact(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) s", "model_load_gib", "model_load_s"),
    fact(r"Loading model weights took ([\d.]+) GB", "model_load_gib"),
    fact(r"Available KV cache memory: ([\d.]+) GiB", "kv_cache_gib"),
    fact(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache", "kv_cache_gib"),  # CPU build
    # --kv-cache-memory-bytes (0.11+; 0.26.0 on the H200): the size is set, not profiled, and
    # gpu_memory_utilization does not apply; the free memory at start tells whether another process
    # holds part of the GPU
    fact(
        r"Initial free memory ([\d.]+) GiB, reserved ([\d.]+) GiB memory for KV Cache as specified by kv_cache_memory_bytes",
        "initial_free_gib",
        "kv_cache_gib",
    ),
    fact(
        r"(reserved) [\d.]+ GiB memory for KV Cache as specified by kv_cache_memory_bytes",
        "kv_cache_set_by",
        convert=lambda _: "kv_cache_memory_bytes",
    ),
    fact(r"Loading weights took ([\d.]+) seconds", "weights_load_s"),
    fact(r"Initializing model took ([\d.]+) seconds", "init_model_s"),  # CPU build: before the weights
    fact(r"# (?:GPU|CPU) blocks: (\d+)", "num_gpu_blocks"),
    fact(r"Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB", "graph_capture_s", "graph_capture_gib"),
    fact(
        r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s(?:econds)?(?: \(compilation: ([\d.]+) s)?",
        "init_engine_s",
        "compile_s",
    ),
    fact(
        r"torch\.compile take[sn]? ([\d.]+) s in total|torch\.compile took ([\d.]+) s in total",
        "torch_compile_s",
        "torch_compile_s",
    ),
    fact(r"Dynamo bytecode transform time: ([\d.]+) s", "dynamo_s"),
    # the engine's own facts (issue 16)
    fact(
        r"vLLM API server version ([\w.+-]+)|LLM engine \(v([\w.+-]+)\)",
        "engine_version",
        "engine_version",
        convert=str,
    ),
    fact(r"Using (\w+) attention backend out of potential backends", "attention_backend", convert=str),
    fact(r"Using (?:AttentionBackendEnum\.)?(\w+) backend\.", "attention_backend", convert=str),
    fact(
        r"Using (Flash Attention|FlashInfer|Triton|XFormers|Torch SDPA|[\w ]+?) backend on V1 engine",
        "attention_backend",
        convert=str,
    ),
    fact(r"\bmax_seq_len=(\d+)", "max_model_len_configured"),
    fact(r"Auto-fit max_model_len: reduced from (\d+) to (\d+)", "max_model_len_auto_fit_from", "max_model_len"),
    fact(r"LLM engine \(v[^)]*\) with config: .*?\bquantization=([\w-]+)", "quantization", convert=str),
    fact(r"LLM engine \(v[^)]*\) with config: .*?\bkv_cache_dtype=([\w-]+)", "kv_cache_dtype", convert=str),
    fact(
        r"LLM engine \(v[^)]*\) with config: .*?\benforce_eager=(True|False)",
        "enforce_eager",
        convert=_BOOL.__getitem__,
    ),
    fact(r"'cudagraph_mode': <CUDAGraphMode\.(\w+)", "cudagraph_mode", convert=str),
    fact(r"'cudagraph_capture_sizes': \[([\d, ]*)\]", "cudagraph_sizes", convert=int_list),
    fact(r"Using cache directory: (\S+) for vLLM's torch\.compile", "compile_cache_dir", convert=str),
    # 0.32's AOT compile cache (the CPU build logs these, not the lines above)
    fact(
        r"Directly load AOT compilation from path (\S+)|saved AOT compiled function to (\S+)",
        "compile_cache_dir",
        "compile_cache_dir",
        convert=str,
    ),
    fact(r"Initial profiling/warmup run took ([\d.]+) s", "profile_run_s"),
]

_CACHE_HIT = re.compile(r"Directly load the compiled graph|Directly load AOT compilation")
_CACHE_MISS = re.compile(
    r"Compiling a graph for|saved AOT compiled function|Compiling model again due to a load failure"
)

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
_CAPTURE_BAR = (
    r"Capturing CUDA graphs \(([^,()]+)(?:, (\w+))?\):[^\r\n]*?\| *(\d+)/(\d+) \[[\d:]+<[\d:?]+, *([\d.]+)(s/it|it/s)\]"
)


# ---------------------------------------------------------------- /metrics
# vLLM V1 (`vllm/v1/metrics/loggers.py`) plus the renamed pre-0.10 names.
#
# Old -> current: gpu_cache_usage_perc -> kv_cache_usage_perc; gpu_prefix_cache_{queries,hits} ->
# prefix_cache_{queries,hits} (v0.8 counted *blocks*, current counts tokens: the hit rate is a ratio
# either way); time_per_output_token_seconds -> inter_token_latency_seconds. Current names come
# first so an engine exposing both during the deprecation period is counted once.
# KV capacity comes from `cache_config_info` labels (`kv_cache_size_tokens`, else
# `num_gpu_blocks * block_size`), summed over `engine` (data-parallel engine cores); the same labels
# say whether `--kv-cache-memory-bytes` fixed the cache's size (then `--gpu-memory-utilization`
# does not apply to it, and advice must name the flag that does).

#: the simulator's device-memory gauges (it has no NVML); read as `sim_gpu_used_bytes` and
#: `sim_gpu_total_bytes` in engine_metrics.jsonl, labelled simulated by harness.diagnose.memory
SIM_GPU = {"sim_gpu_used_bytes": "sim_gpu_memory_used_bytes", "sim_gpu_total_bytes": "sim_gpu_memory_total_bytes"}

#: the simulator's own lag (harness/sim/engine.py): read into the engine block's `simulator`
SIM_LAG_COUNTERS = {"sim_behind_s": ("sim_behind_seconds_total",), "sim_modelled_s": ("sim_modelled_seconds_total",)}
SIM_LAG_HISTOGRAMS = {"sim_step_lag": ("sim_step_lag_seconds",)}


class VllmProfile(Profile):
    def extra_gauges(self, snap: Samples) -> dict[str, float | None]:
        return {key: self.collapse(snap.get(name)) for key, name in SIM_GPU.items() if snap.get(name)}

    def capacity(self, snap: Samples) -> dict[str, float | int | None]:
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
        sizes = [b for _, b in per_engine.values() if b is not None]
        return {
            "kv_capacity_tokens": int(sum(toks)) if toks else None,
            "block_size": sizes[0] if sizes else None,
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


VLLM_METRICS = VllmProfile(
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


# ---------------------------------------------------------------- serving log
# vLLM (and the simulator, which prints the same lines):
# - recompilation: torch.compile's `Recompiling function ...` / `hit config.recompile_limit`; the
#   simulator's `Recompiling function forward ...: batch size N is not in the CUDA graph capture sizes`.
# - preemption: V0's `Sequence group X is preempted by PreemptionMode.RECOMPUTE mode because there is
#   not enough KV cache space` (V1 counts them in `vllm:num_preemptions_total` only).
# - abort: `Aborted request chatcmpl-...` (logged with --enable-log-requests).
VLLM_LOG = LogPatterns(
    "vllm",
    patterns(
        recompilation=(r"not in the CUDA graph capture sizes",),
        preemption=(r"is preempted by PreemptionMode", r"\bpreempted\b.*not enough KV cache"),
        abort=(r"Aborted request",),
        cuda_error=(r"EngineDeadError", r"EngineCore encountered a fatal error"),
    ),
)


# ---------------------------------------------------------------- flags
#: vLLM's own names (the guides'), with the switch senses and defaults the steps use
VLLM_FLAGS = FlagMap(
    "vllm",
    {
        "max-model-len": Knob("max-model-len"),
        "gpu-memory-utilization": Knob("gpu-memory-utilization", default=0.92),
        # the smallest of vLLM 0.26's server defaults (arg_utils.get_batch_defaults: 128 on CPU, 256 on
        # most GPUs, 1024 on 70+ GiB cards), capped like vLLM's by an explicit token budget: a lower
        # bound, so "the running count stayed below it" is true on every platform
        "max-num-seqs": Knob("max-num-seqs", default=128),
        "max-num-batched-tokens": Knob("max-num-batched-tokens"),
        "enable-chunked-prefill": Knob("enable-chunked-prefill", on=True, off=False),
        "enable-prefix-caching": Knob("enable-prefix-caching", on=True, off=False, default_on=True),
        "cuda-graphs": Knob("enforce-eager", on=None, off=True, default_on=True),
        "kv-cache-dtype": Knob("kv-cache-dtype", default="auto", try_values=("fp8",)),
        "tensor-parallel-size": Knob("tensor-parallel-size"),
        "speculative-config": Knob("speculative-config"),
    },
)


# ---------------------------------------------------------------- tokenize
def _tokenize_count(answer: Any) -> int | None:
    """`{"count": N, "tokens": [...]}`; a count from the token list when `count` is missing."""
    if not isinstance(answer, dict):
        return None
    count = answer.get("count")
    if not isinstance(count, int):
        tokens = answer.get("tokens")
        count = len(tokens) if isinstance(tokens, list) else None
    return count


#: POST /tokenize (vLLM's form; SGLang serves the same)
VLLM_TOKENIZE = Tokenize(
    "/tokenize",
    body=lambda model, text: {"model": model, "prompt": text, "add_special_tokens": False},
    count=_tokenize_count,
)


# ---------------------------------------------------------------- the kind
class VLLM(HttpEngine):
    name = "vllm"
    aliases: ClassVar[tuple[str, ...]] = ("vllm-cpu",)
    env: ClassVar[Mapping[str, str]] = {
        "VLLM_SERVER_DEV_MODE": "1"
    }  # enables /reset_prefix_cache, as `vllm bench sweep` does
    cache_env: ClassVar[Mapping[str, str]] = {
        "VLLM_CACHE_ROOT": "vllm",
        "TORCHINDUCTOR_CACHE_DIR": "inductor",
        "TRITON_CACHE_DIR": "triton",
    }
    ready_path = "/health"
    metrics = VLLM_METRICS
    telemetry_profile = "vllm"
    facts = VLLM_FACTS
    log_patterns = VLLM_LOG
    flags = VLLM_FLAGS
    reset_path = "/reset_prefix_cache"
    tokenize: ClassVar[Tokenize | None] = VLLM_TOKENIZE

    def default_command(self, spec: EngineSettings) -> list[str]:
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
