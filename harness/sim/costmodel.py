"""Step-time cost model: how long one engine iteration takes on the simulated GPU.

A roofline with a fixed launch overhead, per GPU (tensor parallelism splits weights, KV and FLOPs):

    step = overhead + sequences x per-sequence overhead + max(memory_time, compute_time) + tp_comm
    memory_time  = (weight_bytes + kv_bytes_read) / hbm_bandwidth
    compute_time = 2 x params x (prefill_tokens + decode_tokens) / effective_flops
    kv_bytes_read = context tokens of every scheduled sequence x kv_bytes_per_token

Defaults (Llama-3.1-8B in bf16 on one H100: 3.35 TB/s, ~600 effective TFLOPS, 4 ms launch
overhead with CUDA graphs) give about 9 ms per decode step at batch 1, 13-15 ms at batch 64 with
1-2k tokens of context each, and ~3,700 prefill tokens per 100 ms. `--enforce-eager` raises the
overhead to 10 ms (no CUDA graphs). A named profile (`--profile`, harness/sim/profiles.py) sets
the overheads, bandwidth and FLOPS fitted to a real engine (bench/sim_fit_h200.py). Speculative decoding verifies 1 + k tokens per sequence
(compute) and pays a draft cost per step: ~0.2 ms for n-gram lookup, 0.6 ms per draft token for
model-based drafters. Everything is divided by `--sim-speed`.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.sim.config import SimConfig

OVERHEAD_GRAPHS_S = 4.0e-3
OVERHEAD_EAGER_S = 10.0e-3
TP_COMM_S = 0.8e-3
NGRAM_DRAFT_S = 0.2e-3
MODEL_DRAFT_PER_TOKEN_S = 0.6e-3


@dataclass
class CostModel:
    overhead_s: float
    weight_read_s: float
    kv_read_s_per_token: float
    flop_s_per_token: float
    tp_comm_s: float
    draft_s: float
    speed: float
    seq_overhead_s: float = 0.0

    @classmethod
    def from_config(cls, cfg: SimConfig) -> CostModel:
        tp = cfg.tensor_parallel_size
        bw = cfg.hbm_tbps * 1e12
        flops = cfg.tflops * 1e12
        draft = 0.0
        if cfg.speculative is not None:
            k = cfg.speculative.num_speculative_tokens
            draft = NGRAM_DRAFT_S if cfg.speculative.method in ("ngram", "suffix") else MODEL_DRAFT_PER_TOKEN_S * k
        return cls(
            overhead_s=cfg.eager_overhead_s if cfg.enforce_eager else cfg.step_overhead_s,
            seq_overhead_s=cfg.seq_overhead_s,
            weight_read_s=cfg.weight_bytes / bw,
            kv_read_s_per_token=cfg.kv_bytes_per_token / bw,
            flop_s_per_token=2.0 * cfg.model.params_b * 1e9 / tp / flops,
            tp_comm_s=TP_COMM_S if tp > 1 else 0.0,
            draft_s=draft,
            speed=cfg.speed,
        )

    def step_seconds(
        self, prefill_tokens: int, decode_tokens: int, context_tokens: int, speculating: bool, sequences: int = 0
    ) -> float:
        """Wall time of one step, already divided by the speed factor."""
        memory = self.weight_read_s + context_tokens * self.kv_read_s_per_token
        compute = (prefill_tokens + decode_tokens) * self.flop_s_per_token
        t = self.overhead_s + sequences * self.seq_overhead_s + max(memory, compute) + self.tp_comm_s
        if speculating:
            t += self.draft_s
        return t / self.speed
