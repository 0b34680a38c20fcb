"""llama.cpp `llama-server --metrics` (tools/server/README.md).

Running = busy slots (`requests_processing`), waiting = `requests_deferred`. KV usage only from
older builds (`kv_cache_usage_ratio`); current builds export none, so it is null. No preemption,
prefix-cache or latency histograms. Speculative decoding counters share vLLM's names.
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
        counters={
            "prompt_tokens": _l("prompt_tokens_total"),
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
