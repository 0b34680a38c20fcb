"""llama.cpp `llama-server`: /health answers 503 `Loading model` until the model is loaded,
then 200 `{"status":"ok"}`; facts from its context and slot lines. No prefix-cache reset: slots
can only be erased with `--slot-save-path`, and the host-memory prompt cache (`--cache-ram`)
has no endpoint, so runs salt their prompts instead (harness/run/prefix_cache.py).

Checked against a real llama-server built from source (tools/setup_llamacpp.sh,
tests/e2e/test_llamacpp.py). At its default verbosity the startup log (llama.cpp of
llama-cpp-python 0.3.36) has one line of facts: `srv load_model: initializing, n_slots = 2,
n_ctx_slot = 2048, kv_unified = 'false'`; the context lines (`llama_context: n_ctx = 4096`,
`n_ctx_seq = 2048`) appear only at a higher `-lv`. So the KV cache all slots share (`n_ctx`,
reported as `kv_cache_tokens`) is n_ctx_slot x n_slots, or n_ctx_slot with a unified cache.
For tuning (harness/tune/flagmap.py) the guide's `max-num-seqs` is its `--parallel` (slots) and
`max-num-batched-tokens` its `--batch-size`.
"""

from __future__ import annotations

from typing import Any

from harness.sweep.engines.base import KINDS, HttpEngine, fact
from harness.sweep.models import EngineSpec

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


class LlamaCpp(HttpEngine):
    name = "llamacpp"
    telemetry_profile = "llamacpp"
    ready_path = "/health"
    facts = LLAMACPP_FACTS

    def startup_facts(self, log_text: str) -> dict[str, Any]:
        facts = super().startup_facts(log_text)
        slot, slots = facts.get("n_ctx_slot"), facts.get("n_slots")
        if "n_ctx" not in facts and isinstance(slot, int) and isinstance(slots, int):
            facts["n_ctx"] = slot if facts.get("kv_unified") else slot * slots
        if "kv_cache_tokens" not in facts and "n_ctx" in facts:
            facts["kv_cache_tokens"] = facts["n_ctx"]
        return facts

    def default_command(self, spec: EngineSpec) -> list[str]:
        return ["llama-server", "-m", "{model}", "--host", "{host}", "--port", "{port}", "--metrics"]


KINDS.add("llamacpp", LlamaCpp())
