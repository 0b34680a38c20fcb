"""Which engine flag each tune step moves: a kind's spelling of each of the guides' knobs.

The steps speak the guides' language, which is vLLM's (`max-num-seqs`, `max-num-batched-tokens`,
`enable-prefix-caching`, ...): `GUIDE_KNOBS`. Other engines name the same knob differently or lack
it; passing a vLLM flag to them makes the engine refuse to start (argparse/typer `No such option`),
which a tune would report as a failed step for the wrong reason. So each kind's `flags` maps every
guide knob to this kind's flag, or to `None` with the reason it has no equivalent (the step is then
skipped with that reason, and nothing is started for it). Kinds that take vLLM's names (vllm, sim,
custom and the rest) use vLLM's map, as a custom command built on vLLM expects.

Switches are described by `on` and `off`: the flag values that turn the feature on and off
(vLLM's CUDA graphs are on by removing `enforce-eager` (None), off with `enforce-eager: true`),
and `default_on`: whether the engine's default has it on (None: the engine decides at start).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the knobs the tune steps move, in the guides' (vLLM's) names; every kind's map names each
GUIDE_KNOBS = (
    "max-model-len",
    "gpu-memory-utilization",
    "max-num-seqs",
    "max-num-batched-tokens",
    "enable-chunked-prefill",
    "enable-prefix-caching",
    "cuda-graphs",
    "kv-cache-dtype",
    "tensor-parallel-size",
    "speculative-config",
)


def flag_key(name: str) -> str:
    """Canonical key of a flag name: no leading dashes, underscores as dashes."""
    return name.lstrip("-").replace("_", "-")


@dataclass(frozen=True)
class Knob:
    """One knob on one kind: its flag, and for a switch the value that turns the feature on."""

    flag: str | None
    why_missing: str = ""
    on: Any = None  # switches: the flag value that turns the feature on (None: remove the flag)
    off: Any = None  # switches: the flag value that turns it off
    default_on: bool | None = None  # switches: the engine's default (None: decided by the engine at start)
    default: Any = None  # valued flags: the engine's default, shown in reasons


@dataclass(frozen=True)
class FlagMap:
    kind: str
    knobs: dict[str, Knob] = field(default_factory=dict)

    def knob(self, guide_flag: str) -> Knob:
        """The kind's knob for a guide (vLLM) flag name; a flag outside the guides' passes as it is."""
        key = flag_key(guide_flag)
        return self.knobs.get(key, Knob(key))

    def lacks(self) -> dict[str, str]:
        """Guide knob -> why this kind has no such flag."""
        return {name: k.why_missing for name, k in self.knobs.items() if k.flag is None}
