"""Any other server: the sweep file gives the command, `ready_path` (default /health, first
200 = ready) and optionally `reset_path` (POST). Facts: the vLLM-style KV lines if printed."""

from __future__ import annotations

from harness.sweep.engines.base import (
    KINDS,
    HttpEngine,
    Probe,
    post_reset,
    probe_get_200,
)
from harness.sweep.engines.vllm import VLLM_FACTS
from harness.sweep.models import EngineSpec


class Custom(HttpEngine):
    name = "custom"
    telemetry_profile = None
    facts = VLLM_FACTS

    def default_command(self, spec: EngineSpec) -> list[str]:
        raise AssertionError("custom engines always have a command (validated)")

    def probe(self, base_url: str, spec: EngineSpec) -> Probe:
        return probe_get_200(base_url, spec.ready_path or "/health")

    def reset_prefix_cache(self, base_url: str, spec: EngineSpec) -> str | None:
        if not spec.reset_path:
            return "engine.reset_path is not set; set it to the POST path that resets the cache"
        return post_reset(base_url, spec.reset_path)


KINDS.add("custom", Custom())
