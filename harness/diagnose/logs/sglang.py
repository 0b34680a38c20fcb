"""SGLang: retraction is its preemption (`KV cache pool is full. Retract requests.`, `Decode out of
memory happened`); aborts as `Abort request`."""

from harness.diagnose.logs import LOG_PATTERNS, LogPatterns, patterns

LOG_PATTERNS.add("sglang", LogPatterns("sglang", patterns(
    preemption=(r"Retract requests", r"Decode out of memory happened", r"#retracted_req"),
    abort=(r"Abort request",),
)))
