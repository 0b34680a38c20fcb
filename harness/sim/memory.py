"""KV-cache sizing, as vLLM does it at startup, and the startup errors it raises.

Memory on one simulated GPU (all sizes per GPU; tensor parallelism divides weights and KV heads):

    requested   = gpu_memory_gib x gpu_memory_utilization
    available   = requested - weights - activation peak - CUDA-graph pool   (or --kv-cache-memory-bytes)
    num_blocks  = available // (block_size x kv_bytes_per_token)            (or --num-gpu-blocks-override)

with kv_bytes_per_token = 2 x layers x kv_heads/tp x head_dim x dtype bytes (fp8 = 1 byte).
The activation peak grows with `max_num_batched_tokens`, as vLLM's profiling run does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.sim.config import GIB, SimConfig

#: Memory outside PyTorch's allocator (CUDA context, NCCL buffers), per GPU.
NON_TORCH_BYTES = int(0.45 * GIB)
#: Peak activation memory per batched token in the profiling forward pass.
ACTIVATION_BYTES_PER_TOKEN = 96 * 1024
#: CUDA-graph memory pool (none with --enforce-eager).


class StartupError(Exception):
    """Startup failed the way vLLM's does: `lines` are printed to stderr, then exit 1."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[0])
        self.lines = [
            *lines,
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        ]


@dataclass
class MemoryPlan:
    weight_bytes: int
    available_kv_bytes: int
    num_gpu_blocks: int
    block_size: int
    max_model_len: int
    graph_bytes: int

    @property
    def kv_cache_size_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size

    @property
    def max_concurrency(self) -> float:
        return self.kv_cache_size_tokens / self.max_model_len


def plan_memory(cfg: SimConfig) -> MemoryPlan:
    """Size the KV cache or raise `StartupError` with vLLM-like messages."""
    total = int(cfg.gpu_memory_gib * GIB)
    util = cfg.gpu_memory_utilization
    if not 0.0 < util <= 1.0:
        raise StartupError(f"ValueError: GPU memory utilization must be within (0, 1]. Got {util}.")
    free = total - int(cfg.gpu_memory_used_gib * GIB)
    requested = int(total * util)
    # vLLM 0.26.0 checks the fraction at worker start (v1/worker/utils.py request_memory) before it
    # looks at --kv-cache-memory-bytes, so another process's memory fails the default even then
    if requested > free:
        raise StartupError(
            f"ValueError: Free memory on device ({free / GIB:.2f}/{total / GIB:.2f} GiB) on startup is less than "
            f"desired GPU memory utilization ({util}, {requested / GIB:.2f} GiB). Decrease GPU memory utilization "
            "or reduce GPU memory used by other processes."
        )
    weights = cfg.weight_bytes
    if weights > free:
        raise StartupError(
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {weights / GIB:.2f} GiB for model weights. "
            f"GPU 0 has a total capacity of {total / GIB:.2f} GiB of which {free / GIB:.2f} GiB is free."
        )
    graph = 0 if cfg.enforce_eager else int(cfg.graph_gib * GIB)
    per_token = cfg.kv_bytes_per_token
    block_bytes = per_token * cfg.block_size
    if cfg.kv_cache_memory_bytes is not None:
        available = cfg.kv_cache_memory_bytes
        if available + weights > free:
            raise StartupError(
                f"ValueError: kv_cache_memory_bytes ({available / GIB:.2f} GiB) plus model weights "
                f"({weights / GIB:.2f} GiB) exceed the free memory on device ({free / GIB:.2f} GiB)."
            )
    else:
        activation = (
            int(cfg.activation_gib * GIB)
            if cfg.activation_gib is not None
            else NON_TORCH_BYTES + ACTIVATION_BYTES_PER_TOKEN * cfg.max_num_batched_tokens
        )
        available = requested - weights - activation - graph
        if available <= 0:
            raise StartupError(
                "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine."
            )
    num_blocks = available // block_bytes
    if cfg.num_gpu_blocks_override is not None:
        num_blocks = cfg.num_gpu_blocks_override
    if num_blocks <= 0:
        raise StartupError(
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )
    kv_tokens = num_blocks * cfg.block_size
    native = cfg.model.max_position
    if cfg.max_model_len is None:  # auto
        max_model_len = min(native, kv_tokens)
    else:
        max_model_len = cfg.max_model_len
        if max_model_len > native:
            raise StartupError(
                f"ValueError: User-specified max_model_len ({max_model_len}) is greater than the derived "
                f"max_model_len (max_position_embeddings={native} or model_max_length=None in model's config.json). "
                "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
            )
    needed_blocks = math.ceil(max_model_len / cfg.block_size)
    if needed_blocks > num_blocks:
        needed = needed_blocks * block_bytes
        raise StartupError(
            f"ValueError: To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({num_blocks * block_bytes / GIB:.2f} GiB). Based on the available memory, the estimated maximum "
            f"model length is {kv_tokens}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
            "when initializing the engine."
        )
    if not cfg.enable_chunked_prefill and cfg.max_num_batched_tokens < max_model_len:
        raise StartupError(
            f"ValueError: max_num_batched_tokens ({cfg.max_num_batched_tokens}) is smaller than max_model_len "
            f"({max_model_len}). This effectively limits the maximum sequence length to max_num_batched_tokens and "
            "makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len."
        )
    if cfg.max_num_batched_tokens < cfg.max_num_seqs:
        raise StartupError(
            f"ValueError: max_num_batched_tokens ({cfg.max_num_batched_tokens}) must be greater than or equal to "
            f"max_num_seqs ({cfg.max_num_seqs})."
        )
    return MemoryPlan(
        weight_bytes=weights,
        available_kv_bytes=available,
        num_gpu_blocks=num_blocks,
        block_size=cfg.block_size,
        max_model_len=max_model_len,
        graph_bytes=graph,
    )
