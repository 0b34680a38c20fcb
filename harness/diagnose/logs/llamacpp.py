"""llama.cpp's server: a full KV cache (`failed to find free space in the KV cache` /
`failed to find a memory slot`, then a context shift or a retry) is its preemption analogue;
`cancel task` on client disconnects; ggml's CUDA errors."""

from harness.diagnose.logs import LOG_PATTERNS, LogPatterns, patterns

LOG_PATTERNS.add("llamacpp", LogPatterns("llamacpp", patterns(
    preemption=(r"failed to find free space in the KV cache", r"failed to find a memory slot", r"context shift"),
    abort=(r"cancel task",),
    cuda_error=(r"ggml_cuda_error", r"GGML_ASSERT"),
)))
