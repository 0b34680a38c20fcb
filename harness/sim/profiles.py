"""Named calibrations of the simulated engine: `harness sim --profile NAME` takes these values as
the defaults of its `--sim-*` flags (a flag given beside the profile still wins).

h200-llama8b-vllm026: vLLM 0.26.0 serving a Llama-3-8B-shape model (random bf16 weights, 8.03 B
parameters) on one NVIDIA H200, CUDA graphs FULL_AND_PIECEWISE, FlashAttention 3. Fitted by
`python bench/sim_fit_h200.py` from results/examples/gpu-h200-vllm-curve and -startup (the fit
data are listed there); the error on held-out runs is bench/results/sim_vs_h200.md. Effective
bandwidth 3.69 TB/s and 635 TFLOPS are what the decode steps and prompts achieved, not datasheet
figures; a decode step costs 0.42 ms + 17.7 us per sequence on top of reading the weights and the
KV cache; a request spends 8.4 ms in the API server and tokenizer before the scheduler sees it,
plus 0.55 ms per sequence already running (the API server's one event loop streams their tokens:
the part of TTFT outside the engine grew with the load). Not fitted but vLLM's behaviour: a waiting
request is admitted only when its whole prompt's KV blocks are free (--scheduler-reserve-full-isl;
the H200 tune's small cache ran 12 sequences at KV usage 0.99 with no preemption).
"""

from __future__ import annotations

PROFILES: dict[str, dict[str, float | bool]] = {
    "h200-llama8b-vllm026": {
        # the model (Llama-3-8B): the simulator's defaults already are this shape
        "sim_layers": 32,
        "sim_kv_heads": 8,
        "sim_head_dim": 128,
        "sim_params_b": 8.03,
        "sim_max_position": 8192,
        # fitted (bench/sim_fit_h200.py)
        "sim_gpu_memory_gib": 139.8,
        "sim_hbm_tbps": 3.691,
        "sim_tflops": 635.3,
        "sim_step_overhead_ms": 0.421,
        "sim_eager_overhead_ms": 22.97,
        "sim_seq_overhead_us": 17.71,
        "sim_request_overhead_ms": 8.38,
        "sim_frontend_seq_us": 548.3,
        "sim_admit_full_prompt": True,  # vLLM's scheduler, not a fit
        "sim_graph_gib": 0.98,
        "sim_activation_gib": 0.346,
        "sim_load_s": 3.93,
        "sim_compile_s": 17.01,
        "sim_compile_cached_s": 4.22,
        "sim_profile_s": 19.27,
        "sim_profile_cached_s": 2.96,
        "sim_capture_s": 3.95,
        "sim_init_s": 41.04,
    },
}
