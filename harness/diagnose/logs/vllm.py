"""vLLM (and the simulator, which prints the same lines).

- recompilation: torch.compile's `Recompiling function ...` / `hit config.recompile_limit`; the
  simulator's `Recompiling function forward ...: batch size N is not in the CUDA graph capture sizes`.
- preemption: V0's `Sequence group X is preempted by PreemptionMode.RECOMPUTE mode because there is
  not enough KV cache space` (V1 counts them in `vllm:num_preemptions_total` only).
- abort: `Aborted request chatcmpl-...` (logged with --enable-log-requests).
"""

from harness.diagnose.logs import LOG_PATTERNS, LogPatterns, patterns

LOG_PATTERNS.add("vllm", LogPatterns("vllm", patterns(
    recompilation=(r"not in the CUDA graph capture sizes",),
    preemption=(r"is preempted by PreemptionMode", r"\bpreempted\b.*not enough KV cache"),
    abort=(r"Aborted request",),
    cuda_error=(r"EngineDeadError", r"EngineCore encountered a fatal error"),
)))
