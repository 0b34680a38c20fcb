"""Hugging Face `transformers serve` (OpenAI-compatible, FastAPI): the engine on the GPU node.

Readiness: with a model given on the command line it is loaded before uvicorn starts, so the
first 200 on /health means ready (503 `cb_worker_dead` when the continuous-batching worker died).
It serves no /metrics (telemetry records the engine side as absent; NVML still samples GPU
memory). It rejects request fields outside OpenAI's (HTTP 422), so scenarios for it set
`sampling.ignore_eos: false`. Tunables: `--continuous-batching`, `--cb-num-blocks`,
`--cb-block-size`, `--cb-max-batch-tokens`, `--cb-max-memory-percent`,
`--cb-use-cuda-graph/--no-cb-use-cuda-graph`, `--attn-implementation`, `--dtype`, `--compile`.

On the CPU (transformers 5.19, tests/e2e/test_transformers_cpu.py): `--device cpu`; without
`--cb-num-blocks` the continuous-batching KV cache is sized from free memory, which on a CPU is
the machine's RAM (about 20 GB taken on a 24 GB box); loading needs `accelerate`; /v1/models
answers 500 when the Hugging Face cache folder does not exist (give the model name); streams end
after the chunk carrying finish_reason and usage, with no `data: [DONE]`; `ignore_eos` is
refused with 422. The only startup fact printed is the Uvicorn port (at `--log-level info`, the
default command's; the CLI's own default, warning, prints none).

Flags: the guide's knobs map to its continuous-batching options where it has one (below); it has
no prefix-cache reset and no tokenize endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from harness.engines.parts.base import KINDS, EngineSettings, HttpEngine
from harness.engines.parts.facts import fact
from harness.engines.parts.flags import FlagMap, Knob

# ---------------------------------------------------------------- startup log
TRANSFORMERS_FACTS = [
    fact(r"Uvicorn running on http://[^:]+:(\d+)", "port"),
    fact(r"num_blocks\s*[=:]\s*(\d+)", "cb_num_blocks"),
    fact(r"max_batch_tokens\s*[=:]\s*(\d+)", "cb_max_batch_tokens"),
]


# ---------------------------------------------------------------- flags
_TF = "transformers serve"
# transformers serve --continuous-batching (transformers 5.x `serve` options, ContinuousBatchingConfig;
# 5.19.0's `serve --help` is tests/engines/data/transformers/transformers_5.19_serve_help.txt, which
# tests/engines/test_flags.py checks every argv of the map against)
TRANSFORMERS_FLAGS = FlagMap(
    "transformers",
    {
        "max-model-len": Knob(
            None,
            f"{_TF} has no context-length limit: a request's context is bounded by the KV cache "
            "(cb-num-blocks x cb-block-size tokens)",
        ),
        "gpu-memory-utilization": Knob("cb-max-memory-percent", default=0.9),  # share of the memory free after loading
        "max-num-seqs": Knob(
            None,
            f"{_TF} has no limit on running sequences as a flag (max_requests_per_batch is not a serve option); "
            "the KV cache size (cb-num-blocks) is what bounds them",
        ),
        "max-num-batched-tokens": Knob("cb-max-batch-tokens"),
        "enable-chunked-prefill": Knob(None, f"{_TF} always splits long prefills by the token budget"),
        "enable-prefix-caching": Knob(
            None, f"{_TF} has no prefix-caching flag (block sharing is always allowed) and no hit-rate metric"
        ),
        "cuda-graphs": Knob("cb-use-cuda-graph", on=True, off=False, default_on=None),  # unset: decided at start
        "kv-cache-dtype": Knob(None, f"{_TF} has no KV-cache dtype flag (the cache takes the model's --dtype)"),
        "tensor-parallel-size": Knob(None, f"{_TF} has no tensor-parallel flag"),
        "speculative-config": Knob(None, f"{_TF} has no speculative decoding with continuous batching"),
    },
)


# ---------------------------------------------------------------- the kind
class TransformersServe(HttpEngine):
    name = "transformers"
    lacks: ClassVar[Mapping[str, str]] = {
        "metrics": "transformers serve exposes no Prometheus /metrics",
        "reset_path": "transformers serve has no prefix-cache reset endpoint",
        "tokenize": "transformers serve has no tokenize endpoint",
    }
    ready_path = "/health"
    no_metrics = "the transformers engine exposes no Prometheus /metrics"
    telemetry_profile = "transformers"
    facts = TRANSFORMERS_FACTS
    flags = TRANSFORMERS_FLAGS

    def default_command(self, spec: EngineSettings) -> list[str]:
        return [
            "transformers",
            "serve",
            "{model}",
            "--host",
            "{host}",
            "--port",
            "{port}",
            "--continuous-batching",
            "--log-level",
            "info",
        ]


KINDS.add("transformers", TransformersServe())
