"""llama.cpp `llama-server`.

- launch: `llama-server -m {model} --metrics`; /health answers 503 `Loading model` until the model
  is loaded, then 200 `{"status":"ok"}`;
- /metrics: `tools/server/server-task.cpp` `to_metrics`, below;
- startup facts from its context and slot lines (below);
- serving log: a full KV cache is its preemption analogue;
- flags: the guide's `max-num-seqs` is its `--parallel` (slots) and `max-num-batched-tokens` its
  `--batch-size`; the rest it lacks, each with the reason;
- no prefix-cache reset: slots can only be erased with `--slot-save-path`, and the host-memory
  prompt cache (`--cache-ram`) has no endpoint, so runs salt their prompts instead
  (harness/run/prefix_cache.py).

Checked against a real llama-server built from source (tools/setup_llamacpp.sh,
tests/e2e/test_llamacpp.py). At its default verbosity the startup log (llama.cpp of
llama-cpp-python 0.3.36) has one line of facts: `srv load_model: initializing, n_slots = 2,
n_ctx_slot = 2048, kv_unified = 'false'`; the context lines (`llama_context: n_ctx = 4096`,
`n_ctx_seq = 2048`) appear only at a higher `-lv`. So the KV cache all slots share (`n_ctx`,
reported as `kv_cache_tokens`) is n_ctx_slot x n_slots, or n_ctx_slot with a unified cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from harness.engines.parts.base import KINDS, EngineSettings, HttpEngine
from harness.engines.parts.facts import fact
from harness.engines.parts.flags import FlagMap, Knob
from harness.engines.parts.logs import LogPatterns, patterns
from harness.engines.parts.metrics import Profile

# ---------------------------------------------------------------- startup log
LLAMACPP_FACTS = [
    fact(r"\bn_ctx\s*=\s*(\d+)", "n_ctx"),
    fact(r"\bn_ctx\s*=\s*(\d+)", "kv_cache_tokens"),  # the name tune and reports read
    fact(r"\bn_ctx_seq\s*=\s*(\d+)", "n_ctx_seq"),
    fact(r"\bn_ctx_slot\s*=\s*(\d+)", "n_ctx_slot"),
    fact(r"\bn_slots\s*=\s*(\d+)", "n_slots"),
    fact(r"\bkv_unified\s*=\s*'?(true|false)'?", "kv_unified", convert=lambda s: s == "true"),
    # issue 16 facts: one sequence's context is the longest request (n_ctx_seq; older builds n_ctx_slot);
    # the build line is the version
    fact(r"\bn_ctx_seq\s*=\s*(\d+)", "max_model_len"),
    fact(r"\bn_ctx_slot\s*=\s*(\d+)", "max_model_len"),
    fact(r"(?m)^build: (\d+ \(\w+\))", "engine_version", convert=str),
    fact(r"\bflash_attn\s*=\s*(\w+)", "flash_attn", convert=str),
    fact(r"llama_kv_cache\w*:.*?K \((\w+)\)", "kv_cache_dtype", convert=str),
]


# ---------------------------------------------------------------- /metrics
# llama.cpp `llama-server --metrics` (tools/server/server-task.cpp `to_metrics`).
#
# Checked against a real `llama-server` built from source (llama-cpp-python 0.3.36's llama.cpp,
# tests/e2e/test_llamacpp.py). Running = busy slots (`requests_processing`), waiting =
# `requests_deferred`. Prompt tokens are counted apart: `prompt_tokens_total` holds only the ones
# computed, `prompt_tokens_cached_total` the ones reused from a slot's cache, so all prompt tokens
# (and prefix-cache queries) = their sum, hits = the cached ones. Generation tokens are counted
# when a request finishes. KV usage only from older builds (`kv_cache_usage_ratio`); current
# builds export none, so it is null. No preemption or latency histograms. Speculative decoding
# counters share vLLM's names.


def _l(*names: str) -> tuple[str, ...]:
    return tuple(f"llamacpp_{n}" for n in names)


LLAMACPP_METRICS = Profile(
    name="llamacpp",
    prefixes=("llamacpp_",),
    prom_prefix="llamacpp[:_]",
    gauges={
        "kv_usage": _l("kv_cache_usage_ratio"),
        "running": _l("requests_processing"),
        "waiting": _l("requests_deferred"),
    },
    summed_counters={
        "prompt_tokens": _l("prompt_tokens_total", "prompt_tokens_cached_total"),
        "prefix_queries": _l("prompt_tokens_total", "prompt_tokens_cached_total"),
    },
    counters={
        "prompt_tokens": _l("prompt_tokens_total"),
        "prefix_hits": _l("prompt_tokens_cached_total"),
        "generation_tokens": _l("tokens_predicted_total"),
        "spec_drafts": _l("spec_decode_num_drafts_total"),
        "spec_draft_tokens": _l("spec_decode_num_draft_tokens_total"),
        "spec_accepted_tokens": _l("spec_decode_num_accepted_tokens_total"),
    },
    labelled_counters={
        "spec_accepted_per_pos": (_l("spec_decode_num_accepted_tokens_per_pos_total"), "position"),
    },
)


# ---------------------------------------------------------------- serving log
# llama.cpp's server: a full KV cache (`failed to find free space in the KV cache` /
# `failed to find a memory slot`, then a context shift or a retry) is its preemption analogue;
# `cancel task` on client disconnects; ggml's CUDA errors.
LLAMACPP_LOG = LogPatterns(
    "llamacpp",
    patterns(
        preemption=(r"failed to find free space in the KV cache", r"failed to find a memory slot", r"context shift"),
        abort=(r"cancel task",),
        cuda_error=(r"ggml_cuda_error", r"GGML_ASSERT"),
    ),
)


# ---------------------------------------------------------------- flags
_LC = "llama-server"
# checked against a real build: tests/e2e/test_llamacpp.py
LLAMACPP_FLAGS = FlagMap(
    "llamacpp",
    {
        "max-model-len": Knob(
            None,
            f"{_LC}'s --ctx-size is the KV cache its --parallel slots share (ctx-size/parallel tokens "
            "per slot unless --kv-unified), not a per-request limit: size it with the slots",
        ),
        "gpu-memory-utilization": Knob(None, f"{_LC} has no memory fraction: its KV cache is --ctx-size tokens"),
        "max-num-seqs": Knob("parallel", default=4),  # slots; -1 (auto) = 4 with a unified KV cache
        "max-num-batched-tokens": Knob("batch-size", default=2048),  # tokens per llama_decode, prompts split to fit
        "enable-chunked-prefill": Knob(
            None, f"{_LC} always splits prompts into --batch-size chunks between decode steps"
        ),
        "enable-prefix-caching": Knob(
            None,
            f"{_LC} reuses each slot's cached prompt (request field cache_prompt, on by "
            "default) and has no server switch",
        ),
        "cuda-graphs": Knob(None, f"{_LC} has no CUDA-graph switch"),
        "kv-cache-dtype": Knob(
            None,
            f"{_LC} sets K and V types apart (--cache-type-k/--cache-type-v: f16, q8_0, q4_0, ...), "
            "not vLLM's fp8 types",
        ),
        "tensor-parallel-size": Knob(
            None, f"{_LC} splits a model across GPUs by layer or row (--split-mode), not by a tensor-parallel size"
        ),
        "speculative-config": Knob(
            None, f"{_LC} speculates with a draft model (--model-draft) or n-gram flags, not vLLM's JSON config"
        ),
    },
)


# ---------------------------------------------------------------- the kind
class LlamaCpp(HttpEngine):
    name = "llamacpp"
    lacks: ClassVar[Mapping[str, str]] = {
        "reset_path": "no endpoint resets llama-server's slots or its host-memory prompt cache",
        "tokenize": "llama-server's /tokenize takes {content} and answers {tokens}, not vLLM's form (not wired)",
    }
    ready_path = "/health"
    metrics = LLAMACPP_METRICS
    telemetry_profile = "llamacpp"
    facts = LLAMACPP_FACTS
    log_patterns = LLAMACPP_LOG
    flags = LLAMACPP_FLAGS

    def startup_facts(self, log_text: str) -> dict[str, Any]:
        facts = super().startup_facts(log_text)
        slot, slots = facts.get("n_ctx_slot"), facts.get("n_slots")
        if "n_ctx" not in facts and isinstance(slot, int) and isinstance(slots, int):
            facts["n_ctx"] = slot if facts.get("kv_unified") else slot * slots
        if "kv_cache_tokens" not in facts and "n_ctx" in facts:
            facts["kv_cache_tokens"] = facts["n_ctx"]
        return facts

    def default_command(self, spec: EngineSettings) -> list[str]:
        return ["llama-server", "-m", "{model}", "--host", "{host}", "--port", "{port}", "--metrics"]


KINDS.add("llamacpp", LlamaCpp())
