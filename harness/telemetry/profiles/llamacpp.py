"""llama.cpp `llama-server --metrics` (tools/server/server-task.cpp `to_metrics`).

Checked against a real `llama-server` built from source (llama-cpp-python 0.3.36's llama.cpp,
tests/e2e/test_llamacpp_real.py). Running = busy slots (`requests_processing`), waiting =
`requests_deferred`. Prompt tokens are counted apart: `prompt_tokens_total` holds only the ones
computed, `prompt_tokens_cached_total` the ones reused from a slot's cache, so all prompt tokens
(and prefix-cache queries) = their sum, hits = the cached ones. Generation tokens are counted
when a request finishes. KV usage only from older builds (`kv_cache_usage_ratio`); current
builds export none, so it is null. No preemption or latency histograms. Speculative decoding
counters share vLLM's names.
"""

from __future__ import annotations

from harness.telemetry.profiles.base import PROFILES, Profile


def _l(*names: str) -> tuple[str, ...]:
    return tuple(f"llamacpp_{n}" for n in names)


LLAMACPP = PROFILES.register("llamacpp")(
    Profile(
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
)
