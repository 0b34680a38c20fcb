"""The simulated engine's startup phases, in vLLM V1's order and with its log lines.

    weight loading -> torch.compile (cold: compile and fill the cache; warm: load from it)
    -> KV-cache profiling and allocation -> CUDA-graph capture -> API server

Each phase sleeps its `StartupTimes` seconds (harness/sim/config.py: a share of `--startup-delay`
unless `--sim-*-s` says otherwise), so `harness startup` can measure cold against warm starts and
`--enforce-eager` against graphs without a GPU. `--enforce-eager` skips compilation and capture,
as vLLM does. The compile cache is a directory keyed by the settings that change the compiled
graph (vLLM keys its cache on the model and compilation config): a marker file written after a
cold compile makes the next start with the same settings load instead of compile. There is no
cache unless `VLLM_CACHE_ROOT` or `--sim-compile-cache` names one (the test suite's simulators
must not write to the home directory).

The parsed facts (harness/engines/vllm.py) read these same lines from a real vLLM.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path
from time import perf_counter

from harness.sim import logs
from harness.sim.config import GIB, SimConfig

#: capture seconds are given for vLLM's default size list at max_num_seqs >= 256 (51 sizes)
REFERENCE_CAPTURE_SIZES = 51


def cache_key(cfg: SimConfig) -> str:
    """What makes a compiled graph reusable: model shape, dtypes, parallelism, the token budget of
    a step and the graph sizes (vLLM recompiles for a new --max-num-batched-tokens or block size)."""
    m = cfg.model
    parts = [
        cfg.served_model_name,
        m.layers,
        m.kv_heads,
        m.head_dim,
        m.params_b,
        cfg.weight_bytes_per_param,
        cfg.quantization,
        cfg.kv_cache_dtype,
        cfg.tensor_parallel_size,
        cfg.block_size,
        cfg.max_num_batched_tokens,
        cfg.capture_sizes,
        cfg.cudagraph_mode,
    ]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:10]


def compilation_config_text(cfg: SimConfig) -> str:
    """The compilation_config part of vLLM's `Initializing a V1 LLM engine` line (sizes largest first)."""
    mode_values = {
        "NONE": "(0, 0)",
        "PIECEWISE": "(1, 1)",
        "FULL": "(2, 2)",
        "FULL_DECODE_ONLY": "(2, 0)",
        "FULL_AND_PIECEWISE": "(2, 1)",
    }
    sizes = sorted(cfg.capture_sizes, reverse=True)
    level = 0 if cfg.enforce_eager else 3
    return (
        f"{{'level': {level}, 'cudagraph_mode': <CUDAGraphMode.{cfg.cudagraph_mode}: "
        f"{mode_values[cfg.cudagraph_mode]}>, 'cudagraph_capture_sizes': {sizes}, "
        f"'max_cudagraph_capture_size': {max(sizes) if sizes else 0}}}"
    )


def _range(cfg: SimConfig) -> str:
    return f"(1, {cfg.max_num_batched_tokens})"


def quantization_text(cfg: SimConfig) -> str:
    return cfg.quantization or "None"


async def load_weights(cfg: SimConfig) -> None:
    t = cfg.startup
    assert t is not None
    logs.log(
        logs.CORE,
        "cuda.py:403",
        f"Using {cfg.attention_backend} attention backend out of potential backends: "
        "['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']",
    )
    logs.log(logs.CORE, "gpu_model_runner.py:2602", f"Starting to load model {cfg.served_model_name}...")
    t0 = perf_counter()
    await asyncio.sleep(t.load_s)
    logs.log(logs.CORE, "default_loader.py:267", f"Loading weights took {perf_counter() - t0:.2f} seconds")
    logs.log(
        logs.CORE,
        "gpu_model_runner.py:2653",
        f"Model loading took {cfg.weight_bytes / GIB:.4f} GiB memory and {perf_counter() - t0:.6f} seconds",
    )


async def compile_model(cfg: SimConfig) -> float:
    """torch.compile: cold fills the cache, warm loads from it; returns the seconds it took."""
    t = cfg.startup
    assert t is not None
    if cfg.enforce_eager:
        return 0.0
    t0 = perf_counter()
    cache = Path(t.cache_dir, cache_key(cfg), "rank_0_0", "backbone") if t.cache_dir else None
    hit = cache is not None and (cache / "done").exists()
    if cache is not None:
        logs.log(logs.CORE, "backends.py:548", f"Using cache directory: {cache} for vLLM's torch.compile")
    # the bytecode transform runs either way; in the real engine it is a few seconds
    await asyncio.sleep((t.compile_cached_s if hit else t.compile_s) * 0.2)
    logs.log(logs.CORE, "backends.py:559", f"Dynamo bytecode transform time: {perf_counter() - t0:.2f} s")
    t1 = perf_counter()
    if hit:
        await asyncio.sleep(t.compile_cached_s * 0.8)
        logs.log(
            logs.CORE,
            "backends.py:164",
            f"Directly load the compiled graph(s) for compile range {_range(cfg)} from the cache, "
            f"took {perf_counter() - t1:.3f} s",
        )
    else:
        await asyncio.sleep(t.compile_s * 0.8)
        logs.log(
            logs.CORE,
            "backends.py:218",
            f"Compiling a graph for compile range {_range(cfg)} takes {perf_counter() - t1:.2f} s",
        )
        if cache is not None:
            try:
                cache.mkdir(parents=True, exist_ok=True)
                (cache / "done").write_text(cache_key(cfg) + "\n")
            except OSError as exc:  # a read-only cache only costs the next start a compile
                logs.log(logs.CORE, "backends.py:230", f"Could not save the compiled graph: {exc}", level="WARNING")
    took = perf_counter() - t0
    logs.log(logs.CORE, "monitor.py:34", f"torch.compile took {took:.2f} s in total")
    return took


async def profile_kv(cfg: SimConfig) -> None:
    """The profiling run; warm when an earlier start left its kernel caches in the cache root
    (vLLM's first run JIT-compiles Triton/Inductor kernels: 19 s cold vs 3 s warm on the H200)."""
    t = cfg.startup
    assert t is not None
    marker = Path(t.cache_dir, "kernels-" + cache_key(cfg)) if t.cache_dir else None
    warm = marker is not None and marker.exists()
    await asyncio.sleep(t.profile_cached_s if warm else t.profile_s)
    if marker is not None and not warm:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text("warm\n")
        except OSError:
            pass


async def capture_graphs(cfg: SimConfig, graph_bytes: int) -> None:
    """tqdm-style bars per mode (as vLLM prints them), then the summary line."""
    t = cfg.startup
    assert t is not None
    sizes = cfg.capture_sizes
    if cfg.enforce_eager or not sizes:
        return
    t0 = perf_counter()
    await asyncio.sleep(t.capture_s * len(sizes) / REFERENCE_CAPTURE_SIZES)
    elapsed = perf_counter() - t0
    bars = []
    if cfg.cudagraph_mode in ("PIECEWISE", "FULL_AND_PIECEWISE"):
        bars.append(("mixed prefill-decode, PIECEWISE", sizes))
    if cfg.cudagraph_mode in ("FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"):
        decode = [s for s in sizes if s <= cfg.max_num_seqs] if cfg.cudagraph_mode != "FULL" else sizes
        bars.append(("decode, FULL" if cfg.cudagraph_mode != "FULL" else "mixed prefill-decode, FULL", decode))
    import sys

    # each bar gets its share of the time, so that n / rate in the bar is its duration (as in vLLM's)
    total = sum(len(g) for _, g in bars) or 1
    for label, group in bars:
        n = len(group)
        took = max(elapsed * n / total, 1e-6)
        sys.stderr.write(
            f"Capturing CUDA graphs ({label}): 100%|██████████| {n}/{n} "
            f"[00:{int(took):02d}<00:00, {n / took:.2f}it/s]\n"
        )
    sys.stderr.flush()
    logs.log(
        logs.CORE,
        "gpu_model_runner.py:3480",
        f"Graph capturing finished in {elapsed:.0f} secs, took {graph_bytes / GIB:.2f} GiB",
    )


def log_max_model_len_fit(cfg: SimConfig, final: int, available_kv_bytes: int) -> None:
    """With --max-model-len auto vLLM fits the length to the KV cache and says so."""
    native = cfg.model.max_position
    if cfg.max_model_len is None and final < native:
        logs.log(
            logs.CORE,
            "kv_cache_utils.py:2478",
            f"Auto-fit max_model_len: reduced from {native} to {final} to fit in available KV cache memory "
            f"({round(available_kv_bytes / GIB, 2)} GiB GPU)",
        )


def env_cache_root() -> str | None:
    return os.environ.get("VLLM_CACHE_ROOT")
