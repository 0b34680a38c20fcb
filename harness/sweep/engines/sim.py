"""The built-in simulated engine (`python -m harness.sim`): vLLM's readiness, log lines and
endpoints, so a sweep can be tried end to end without a GPU."""

from __future__ import annotations

from harness.sweep.engines.base import KINDS
from harness.sweep.engines.vllm import VLLM
from harness.sweep.models import EngineSpec


class Sim(VLLM):
    name = "sim"
    telemetry_profile = "vllm"
    env = {}

    def default_command(self, spec: EngineSpec) -> list[str]:
        return ["{python}", "-m", "harness.sim", "--host", "{host}", "--port", "{port}"]


KINDS.add("sim", Sim())
