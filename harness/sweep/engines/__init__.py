"""Engine kinds, one module each, registered by name in `KINDS`."""

from harness.sweep.engines import (  # noqa: F401  (registration)
    custom,
    external,
    llamacpp,
    sglang,
    sim,
    tgi,
    transformers,
    vllm,
)
from harness.sweep.engines.base import KINDS, EngineKind, Probe, failure_hint


def get_kind(name: str) -> EngineKind:
    return KINDS.get(name)


__all__ = ["KINDS", "EngineKind", "Probe", "failure_hint", "get_kind"]
