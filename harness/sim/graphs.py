"""CUDA graphs while serving: recompiles for uncaptured batch sizes, and the memory they cost.

vLLM captures CUDA graphs at startup for its capture sizes; a decode step of N tokens replays
the graph of the smallest captured size >= N (padding). A step larger than every captured size
has no graph: the simulator then does what guide 001 (2.2) describes for shapes the warmup did
not cover: it logs a torch.compile-style recompilation warning (once per new size), stalls that
step for the compile (`--sim-recompile-ms`), and grows the graph pool (`--sim-graph-mib-per-shape`,
"typically 100-300 MB per bucket shape"). When the pool would grow past the device it logs
vLLM's CUDA out-of-memory error instead and runs the size without a graph.

The simulated device's used memory (startup level + graph-pool growth, plus what other processes
hold) is exported as the `sim_gpu_memory_used_bytes` / `sim_gpu_memory_total_bytes` gauges: a
simulator has no NVML, and the harness's memory analysis reads these, labelled "simulated".
With the default capture sizes (up to 2 x max-num-seqs) no decode step is uncaptured; pass
smaller `--cuda-graph-sizes` to provoke it.
"""

from __future__ import annotations

from harness.sim import logs
from harness.sim.config import GIB, SimConfig
from harness.sim.memory import ACTIVATION_BYTES_PER_TOKEN, NON_TORCH_BYTES, MemoryPlan
from harness.sim.metrics import Stats

MIB = 1 << 20


class GraphPool:
    def __init__(self, cfg: SimConfig, plan: MemoryPlan, stats: Stats) -> None:
        self.cfg = cfg
        self.stats = stats
        sizes = sorted(getattr(cfg, "capture_sizes", None) or [])
        self.largest = sizes[-1] if sizes and not cfg.enforce_eager else None
        self.seen: set[int] = set()
        self.grow_bytes = int(getattr(cfg, "graph_mib_per_shape", 150.0) * MIB)
        self.stall_s = float(getattr(cfg, "recompile_ms", 40.0)) / 1000.0
        total = int(cfg.gpu_memory_gib * GIB)
        kv = plan.num_gpu_blocks * cfg.block_size * cfg.kv_bytes_per_token
        engine = (
            NON_TORCH_BYTES
            + plan.weight_bytes
            + ACTIVATION_BYTES_PER_TOKEN * cfg.max_num_batched_tokens
            + plan.graph_bytes
            + kv
        )
        stats.gpu_total_bytes = total
        stats.gpu_used_bytes = min(total, int(cfg.gpu_memory_used_gib * GIB) + engine)

    def step(self, prefill: int, decode: int) -> float:
        """Seconds this step stalls for a recompile (0 for captured or mixed prefill steps).
        `decode`: sequences in the decode step (vLLM scales its capture sizes by 1 + k with
        speculative decoding, so a size counts sequences, not their draft tokens)."""
        if self.largest is None or prefill or decode <= self.largest or decode in self.seen:
            return 0.0
        self.seen.add(decode)
        s = self.stats
        s.recompilations += 1
        if s.gpu_used_bytes + self.grow_bytes > s.gpu_total_bytes:
            free = max(0, s.gpu_total_bytes - s.gpu_used_bytes)
            logs.log(
                logs.CORE,
                "gpu_model_runner.py:3512",
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {self.grow_bytes / MIB:.2f} MiB. "
                f"GPU 0 has a total capacity of {s.gpu_total_bytes / GIB:.2f} GiB of which {free / MIB:.2f} MiB is "
                f"free. (capturing a CUDA graph for batch size {decode}; running it without a graph)",
                level="ERROR",
            )
            return self.stall_s
        s.gpu_used_bytes += self.grow_bytes
        logs.log(
            logs.CORE,
            "backends.py:212",
            f"Recompiling function forward in gpu_model_runner.py: batch size {decode} is not in the CUDA graph "
            f"capture sizes (largest {self.largest}); compiling and capturing it while serving "
            f"(graph pool +{self.grow_bytes / MIB:.0f} MiB)",
            level="WARNING",
        )
        return self.stall_s
