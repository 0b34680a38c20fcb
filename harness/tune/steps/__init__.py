"""One module per step of the guide's procedure, registered in STEPS by its tune.json name."""

from harness.tune.steps import (  # noqa: F401  (each module registers itself)
    baseline,
    cache_check,
    context_length,
    cuda_graphs,
    final,
    gpu_memory,
    kv_dtype,
    max_num_batched_tokens,
    max_num_seqs,
    parallelism,
    speculative,
)
from harness.tune.steps.base import STEPS, Step, StepResult

__all__ = ["STEPS", "Step", "StepResult"]
