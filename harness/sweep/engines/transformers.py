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
"""

from __future__ import annotations

from harness.sweep.engines.base import KINDS, HttpEngine, fact
from harness.sweep.models import EngineSpec

TRANSFORMERS_FACTS = [
    fact(r"Uvicorn running on http://[^:]+:(\d+)", "port"),
    fact(r"num_blocks\s*[=:]\s*(\d+)", "cb_num_blocks"),
    fact(r"max_batch_tokens\s*[=:]\s*(\d+)", "cb_max_batch_tokens"),
]


class TransformersServe(HttpEngine):
    name = "transformers"
    telemetry_profile = "transformers"
    ready_path = "/health"
    facts = TRANSFORMERS_FACTS

    def default_command(self, spec: EngineSpec) -> list[str]:
        return ["transformers", "serve", "{model}", "--host", "{host}", "--port", "{port}", "--continuous-batching",
                "--log-level", "info"]


KINDS.add("transformers", TransformersServe())
