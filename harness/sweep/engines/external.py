"""A server already running (a Kubernetes deployment, a shared box): nothing is started, stopped
or restarted. Ready = `ready_path` (default /v1/models) answers 200. Without restarts no engine
flag can change, so such a sweep varies only the load (`loads`) and scenario overrides: the
latency-throughput curve of what is deployed. The prefix cache is reset only through
`reset_path`; telemetry detects the engine from its /metrics page."""

from __future__ import annotations

from harness.sweep.engines.base import (
    KINDS,
    HttpEngine,
    Probe,
    post_reset,
    probe_get_200,
)
from harness.sweep.models import EngineSpec


class External(HttpEngine):
    name = "external"
    telemetry_profile = None
    ready_path = "/v1/models"

    def default_command(self, spec: EngineSpec) -> list[str]:
        return []

    def probe(self, base_url: str, spec: EngineSpec) -> Probe:
        return probe_get_200(base_url, spec.ready_path or self.ready_path)

    def reset_prefix_cache(self, base_url: str, spec: EngineSpec) -> str | None:
        if not spec.reset_path:
            return "kind external: engine.reset_path is not set (vLLM: /reset_prefix_cache with VLLM_SERVER_DEV_MODE=1)"
        return post_reset(base_url, spec.reset_path)


KINDS.add("external", External())
