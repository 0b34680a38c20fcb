"""The built-in simulated engine (`python -m harness.sim`): vLLM's readiness, log lines, /metrics
names, flags and cache-reset endpoint, so a sweep or a tune can be tried end to end without a GPU.
It serves no /tokenize: it counts the built-in words as its tokens, so there is nothing to calibrate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from harness.engines.parts.base import KINDS, EngineSettings
from harness.engines.vllm import VLLM


class Sim(VLLM):
    name = "sim"
    aliases = ()
    lacks: ClassVar[Mapping[str, str]] = {
        "tokenize": "the simulated engine counts the built-in words as its tokens: nothing to calibrate"
    }
    env: ClassVar[Mapping[str, str]] = {}
    tokenize = None

    def default_command(self, spec: EngineSettings) -> list[str]:
        return ["{python}", "-m", "harness.sim", "--host", "{host}", "--port", "{port}"]


KINDS.add("sim", Sim())
