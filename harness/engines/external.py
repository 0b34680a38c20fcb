"""A server already running (a Kubernetes deployment, a shared box): nothing is started, stopped
or restarted. Ready = `ready_path` (default /v1/models) answers 200. Without restarts no engine
flag can change, so such a sweep varies only the load (`loads`) and scenario overrides: the
latency-throughput curve of what is deployed. The prefix cache is reset only through
`reset_path`; telemetry detects the engine from its /metrics page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from harness.engines.parts.base import KINDS, AnyServer, EngineSettings
from harness.engines.vllm import VLLM_FLAGS, VLLM_TOKENIZE


class External(AnyServer):
    name = "external"
    lacks: ClassVar[Mapping[str, str]] = {
        "metrics": "detected from the server's /metrics page",
        "reset_path": "the sweep file's engine.reset_path",
    }
    starts_engine = False
    ready_path = "/v1/models"
    missing_reset = (
        "kind external: engine.reset_path is not set (vLLM: /reset_prefix_cache with VLLM_SERVER_DEV_MODE=1)"
    )
    flags = VLLM_FLAGS  # unused: an external server's flags cannot change
    tokenize = VLLM_TOKENIZE

    def default_command(self, spec: EngineSettings) -> list[str]:
        return []


KINDS.add("external", External())
