"""TGI (text-generation-inference): the router logs a cancelled stream; the shard's OOM is a Python
`torch.OutOfMemoryError` (in COMMON)."""

from harness.diagnose.logs import LOG_PATTERNS, LogPatterns, patterns

LOG_PATTERNS.add("tgi", LogPatterns("tgi", patterns(
    abort=(r"Request was cancelled", r"client disconnected"),
    oom=(r"Out of memory", r"OOM"),
)))
