"""llama.cpp `llama-server`: /health answers 503 `Loading model` until the model is loaded,
then 200; facts from its context/slot lines. No prefix-cache reset endpoint."""

from __future__ import annotations

from harness.sweep.engines.base import KINDS, HttpEngine, fact
from harness.sweep.models import EngineSpec

LLAMACPP_FACTS = [
    fact(r"\bn_ctx\s*=\s*(\d+)", "n_ctx"),
    fact(r"\bn_ctx_slot\s*=\s*(\d+)", "n_ctx_slot"),
    fact(r"\bn_slots\s*=\s*(\d+)", "n_slots"),
]


class LlamaCpp(HttpEngine):
    name = "llamacpp"
    telemetry_profile = "llamacpp"
    ready_path = "/health"
    facts = LLAMACPP_FACTS

    def default_command(self, spec: EngineSpec) -> list[str]:
        return ["llama-server", "-m", "{model}", "--host", "{host}", "--port", "{port}", "--metrics"]


KINDS.add("llamacpp", LlamaCpp())
