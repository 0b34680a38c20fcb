"""What an engine's log says during serving: a kind's pattern table (its `log_patterns`).

A table lists, per event kind, the regexes of lines that count once each (harness.diagnose
.enginelog counts them over the measured window); `COMMON` holds the lines every PyTorch engine
can print (torch.compile recompiles, CUDA out of memory, CUDA errors), and `GENERIC`, only those,
is the table of a kind without lines of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: event kind -> (what a count means, in words for the validity block)
EVENTS: dict[str, str] = {
    "recompilation": "recompilations during the window: shapes not covered by the CUDA-graph capture sizes",
    "preemption": "preemption warnings in the engine log: sequences evicted from the KV cache and recomputed",
    "oom": "out-of-memory errors in the engine log",
    "cuda_error": "CUDA errors in the engine log",
    "abort": "request aborts in the engine log",
}


@dataclass(frozen=True)
class LogPatterns:
    name: str
    patterns: dict[str, tuple[re.Pattern[str], ...]] = field(default_factory=dict)

    def classify(self, line: str) -> str | None:
        for kind, regexes in self.patterns.items():
            if any(rx.search(line) for rx in regexes):
                return kind
        return None


def patterns(**by_kind: tuple[str, ...]) -> dict[str, tuple[re.Pattern[str], ...]]:
    out: dict[str, tuple[re.Pattern[str], ...]] = {}
    for kind in EVENTS:  # a line counts for the first kind that matches, in EVENTS order
        regexes = tuple(by_kind.get(kind, ())) + COMMON.get(kind, ())
        if regexes:
            out[kind] = tuple(re.compile(r) for r in regexes)
    return out


COMMON: dict[str, tuple[str, ...]] = {
    "recompilation": (
        r"Recompiling function",
        r"torch\._dynamo hit config\.(?:recompile|cache_size)_limit",
        r"recompile_limit reached",
    ),
    "oom": (r"OutOfMemoryError", r"CUDA out of memory", r"cudaMalloc failed: out of memory"),
    "cuda_error": (r"CUDA error", r"cudaError\w*", r"illegal memory access", r"NCCL error"),
}

#: the table of a kind whose serving log has no lines of its own to look for
GENERIC = LogPatterns("generic", patterns())
