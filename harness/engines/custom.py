"""Any other server started by the sweep: the sweep file gives the command, `ready_path` (default
/health, first 200 = ready) and optionally `reset_path` (POST). Facts: the vLLM-style KV lines if
printed; flags and tokenize in vLLM's form (a custom command is most often built on vLLM); its
/metrics profile is detected from the page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from harness.engines.parts.base import KINDS, AnyServer, EngineSettings
from harness.engines.vllm import VLLM_FACTS, VLLM_FLAGS, VLLM_TOKENIZE


class Custom(AnyServer):
    name = "custom"
    lacks: ClassVar[Mapping[str, str]] = {
        "metrics": "detected from the server's /metrics page",
        "reset_path": "the sweep file's engine.reset_path",
    }
    facts = VLLM_FACTS
    flags = VLLM_FLAGS
    tokenize = VLLM_TOKENIZE

    def default_command(self, spec: EngineSettings) -> list[str]:
        return []  # none: the sweep file must give `command` (harness.sweep.models checks it)


KINDS.add("custom", Custom())
