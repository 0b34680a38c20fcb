"""Which engine flag each tune step moves, per engine kind.

The steps speak the guides' language, which is vLLM's (`max-num-seqs`, `max-num-batched-tokens`,
`enable-prefix-caching`, ...). Other engines name the same knob differently or lack it; passing
a vLLM flag to them makes the engine refuse to start (argparse/typer `No such option`), which a
tune would report as a failed step for the wrong reason. So each kind that differs registers a
map here: vLLM name -> this kind's flag, or `None` with the reason it has no equivalent (the step
is then skipped with that reason, and nothing is started for it). Kinds with no map (vllm, sim,
custom and the rest) use vLLM's names, as a custom command built on vLLM expects.

Switches are described by `on` and `off`: the flag values that turn the feature on and off
(vLLM's CUDA graphs are on by removing `enforce-eager` (None), off with `enforce-eager: true`),
and `default_on`: whether the engine's default has it on (None: the engine decides at start).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.registry import Registry
from harness.sweep.flags import flag_key


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

    def knob(self, vllm_flag: str) -> Knob:
        """The kind's knob for a vLLM flag name (vLLM's own when the map does not name it)."""
        return self.knobs.get(flag_key(vllm_flag), VLLM.knobs.get(flag_key(vllm_flag), Knob(flag_key(vllm_flag))))


#: vLLM's own names (the guides'), with the switch senses and defaults the steps use
VLLM = FlagMap("vllm", {
    "max-model-len": Knob("max-model-len"),
    "gpu-memory-utilization": Knob("gpu-memory-utilization", default=0.92),
    "max-num-seqs": Knob("max-num-seqs"),
    "max-num-batched-tokens": Knob("max-num-batched-tokens"),
    "enable-chunked-prefill": Knob("enable-chunked-prefill", on=True, off=False),
    "enable-prefix-caching": Knob("enable-prefix-caching", on=True, off=False, default_on=True),
    "cuda-graphs": Knob("enforce-eager", on=None, off=True, default_on=True),
    "kv-cache-dtype": Knob("kv-cache-dtype"),
    "tensor-parallel-size": Knob("tensor-parallel-size"),
    "speculative-config": Knob("speculative-config"),
})

FLAG_MAPS: Registry[FlagMap] = Registry("tune flag map")


def flag_map(kind: str) -> FlagMap:
    return FLAG_MAPS.get(kind) if kind in FLAG_MAPS else VLLM


_TF = "transformers serve"
# transformers serve --continuous-batching (transformers 5.x `serve` options, ContinuousBatchingConfig)
FLAG_MAPS.add("transformers", FlagMap("transformers", {
    "max-model-len": Knob(None, f"{_TF} has no context-length limit: a request's context is bounded by the KV cache "
                                "(cb-num-blocks x cb-block-size tokens)"),
    "gpu-memory-utilization": Knob("cb-max-memory-percent", default=0.9),  # share of the memory free after loading
    "max-num-seqs": Knob(None, f"{_TF} has no limit on running sequences as a flag (max_requests_per_batch is not a serve option); "
                               "the KV cache size (cb-num-blocks) is what bounds them"),
    "max-num-batched-tokens": Knob("cb-max-batch-tokens"),
    "enable-chunked-prefill": Knob(None, f"{_TF} always splits long prefills by the token budget"),
    "enable-prefix-caching": Knob(None, f"{_TF} has no prefix-caching flag (block sharing is always allowed) and no "
                                        "hit-rate metric"),
    "cuda-graphs": Knob("cb-use-cuda-graph", on=True, off=False, default_on=None),  # unset: decided at start
    "kv-cache-dtype": Knob(None, f"{_TF} has no KV-cache dtype flag (the cache takes the model's --dtype)"),
    "tensor-parallel-size": Knob(None, f"{_TF} has no tensor-parallel flag"),
    "speculative-config": Knob(None, f"{_TF} has no speculative decoding with continuous batching"),
}))

_LC = "llama-server"
# llama.cpp's llama-server (checked against a real build: tests/e2e/test_llamacpp.py)
FLAG_MAPS.add("llamacpp", FlagMap("llamacpp", {
    "max-model-len": Knob(None, f"{_LC}'s --ctx-size is the KV cache its --parallel slots share (ctx-size/parallel tokens "
                                "per slot unless --kv-unified), not a per-request limit: size it with the slots"),
    "gpu-memory-utilization": Knob(None, f"{_LC} has no memory fraction: its KV cache is --ctx-size tokens"),
    "max-num-seqs": Knob("parallel", default=4),  # slots; -1 (auto) = 4 with a unified KV cache
    "max-num-batched-tokens": Knob("batch-size", default=2048),  # tokens per llama_decode, prompts split to fit
    "enable-chunked-prefill": Knob(None, f"{_LC} always splits prompts into --batch-size chunks between decode steps"),
    "enable-prefix-caching": Knob(None, f"{_LC} reuses each slot's cached prompt (request field cache_prompt, on by "
                                        "default) and has no server switch"),
    "cuda-graphs": Knob(None, f"{_LC} has no CUDA-graph switch"),
    "kv-cache-dtype": Knob(None, f"{_LC} sets K and V types apart (--cache-type-k/--cache-type-v: f16, q8_0, q4_0, ...), "
                                 "not vLLM's fp8 types"),
    "tensor-parallel-size": Knob(None, f"{_LC} splits a model across GPUs by layer or row (--split-mode), "
                                       "not by a tensor-parallel size"),
    "speculative-config": Knob(None, f"{_LC} speculates with a draft model (--model-draft) or n-gram flags, "
                                     "not vLLM's JSON config"),
}))
