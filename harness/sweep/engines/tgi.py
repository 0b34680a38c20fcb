"""Hugging Face TGI (`text-generation-launcher`): /health 200 when the shard is up (503
otherwise); `Setting max batch total tokens to N` is its KV budget. No prefix-cache reset."""

from __future__ import annotations

from harness.sweep.engines.base import KINDS, HttpEngine, fact
from harness.sweep.models import EngineSpec

TGI_FACTS = [
    fact(r"Setting max batch total tokens to (\d+)", "max_batch_total_tokens"),
    fact(r"Setting max batch total tokens to (\d+)", "kv_cache_tokens"),
]


class TGI(HttpEngine):
    name = "tgi"
    telemetry_profile = "tgi"
    ready_path = "/health"
    facts = TGI_FACTS

    def default_command(self, spec: EngineSpec) -> list[str]:
        return ["text-generation-launcher", "--model-id", "{model}", "--hostname", "{host}", "--port", "{port}"]


KINDS.add("tgi", TGI())
