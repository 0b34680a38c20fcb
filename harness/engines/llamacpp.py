"""llama.cpp `llama-server`.

- launch: `llama-server -m {model} --metrics`; /health answers 503 `Loading model` until the model
  is loaded, then 200 `{"status":"ok"}`;
- /metrics: `tools/server/server-task.cpp` `to_metrics`, below;
- startup facts from its context and slot lines (below);
- serving log: a full KV cache is its preemption analogue;
- flags (`LLAMACPP_FLAGS`, below): llama-server's options (`common/arg.cpp`, the same as
  `tools/server/README.md`) of the llama.cpp that llama-cpp-python 0.3.36 carries (commit 0c1e570;
  `llama-server --help` recorded in tests/engines/data/llamacpp/llama-server_0c1e570_help.txt, which
  tests/engines/test_flags.py checks every argv of the map against; tests/e2e/test_llamacpp.py
  starts the real build with them);
- no prefix-cache reset: slots can only be erased with `--slot-save-path`, and the host-memory
  prompt cache (`--cache-ram`) has no endpoint, so runs salt their prompts instead
  (harness/run/prefix_cache.py);
- tokenize: POST /tokenize takes {content, add_special} and answers {tokens: [...]}
  (`tools/server/server-context.cpp` `post_tokenize`); no special tokens are added (the default).

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

from harness.engines.parts.base import KINDS, EngineSettings, HttpEngine, Tokenize
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
# llama-server of llama.cpp 0c1e570 (llama-cpp-python 0.3.36):
# - max-model-len: `--kv-unified-per-slot N`, the "context limit per parallel slot"; without
#   -c/--ctx-size the KV pool is sized to n_parallel * N (tools/server/server.cpp), so the limit
#   stays N per request whatever --parallel the max-num-seqs step sets. (`--ctx-size` is the KV
#   cache all slots share, ctx-size/parallel tokens each unless --kv-unified: not a per-request limit.)
# - max-num-seqs: `--parallel` (slots; default -1 = auto: 4 slots sharing a unified KV cache);
# - max-num-batched-tokens: `--batch-size` (the logical batch one llama_decode takes, default 2048;
#   prompts are split to fit and the slots' decode tokens ride along);
# - enable-prefix-caching: `--cache-prompt` / `--no-cache-prompt` (default enabled);
# - cuda-graphs: no option; ggml's CUDA backend captures graphs unless the environment variable
#   GGML_CUDA_DISABLE_GRAPHS is set, to any value (ggml/src/ggml-cuda/common.cuh: getenv != NULL): env,
#   on = unset, off = 1;
# - kv-cache-dtype: `--cache-type-k` and `--cache-type-v` (f32, f16, bf16, q8_0, q4_0, ...; default
#   f16), one value for both; no FP8, so the KV-dtype step tries q8_0 (a quantized V cache needs
#   flash attention: -fa, auto by default);
# - speculative-config: `--spec-type` (draft-simple, draft-eagle3, ngram-simple, ngram-mod, ...) with
#   the draft model `--model-draft` and `--spec-draft-n-max` as flags of their own (0c1e570 removed
#   --draft-max): a candidate is the type (`ngram-simple`) or a mapping of these flags.
_LC = "llama-server"
LLAMACPP_FLAGS = FlagMap(
    "llamacpp",
    {
        "max-model-len": Knob("kv-unified-per-slot"),
        "gpu-memory-utilization": Knob(
            None,
            f"{_LC} has no memory fraction: its KV cache is --ctx-size tokens and the GPU holds the layers "
            "-ngl / --fit offload",
        ),
        "max-num-seqs": Knob("parallel", default=-1),
        "max-num-batched-tokens": Knob("batch-size", default=2048),
        "enable-chunked-prefill": Knob(
            None, f"{_LC} always splits prompts into --batch-size chunks between decode steps (no switch)"
        ),
        "enable-prefix-caching": Knob("cache-prompt", on=True, off=False, default_on=True),
        "cuda-graphs": Knob("env:GGML_CUDA_DISABLE_GRAPHS", on=None, off="1", default_on=True),
        "kv-cache-dtype": Knob(
            "cache-type-k", also=("cache-type-v",), copies=True, default="f16", try_values=("q8_0",)
        ),
        "tensor-parallel-size": Knob(
            None,
            f"{_LC} splits a model over every visible GPU by --split-mode (layer, row, tensor) and "
            "--tensor-split proportions, not by a tensor-parallel size (choose the GPUs with CUDA_VISIBLE_DEVICES)",
        ),
        "speculative-config": Knob("spec-type", also=("model-draft", "spec-draft-n-max")),
    },
)


# ---------------------------------------------------------------- tokenize
def _tokens_count(answer: Any) -> int | None:
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    return len(tokens) if isinstance(tokens, list) else None


#: POST /tokenize {content} -> {tokens: [ids]} (no special tokens added: add_special defaults to false)
LLAMACPP_TOKENIZE = Tokenize("/tokenize", body=lambda model, text: {"content": text}, count=_tokens_count)


# ---------------------------------------------------------------- the kind
class LlamaCpp(HttpEngine):
    name = "llamacpp"
    lacks: ClassVar[Mapping[str, str]] = {
        "reset_path": "no endpoint resets llama-server's slots or its host-memory prompt cache",
    }
    ready_path = "/health"
    metrics = LLAMACPP_METRICS
    telemetry_profile = "llamacpp"
    facts = LLAMACPP_FACTS
    log_patterns = LLAMACPP_LOG
    flags = LLAMACPP_FLAGS
    tokenize = LLAMACPP_TOKENIZE

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
