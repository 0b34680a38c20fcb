"""What an engine's startup log says (harness.engines: each kind's fact table, then the facts
it derives), as written into index.json `startup_facts` and startup.json `facts`.

A Record: each kind writes its facts in its own table's order, only those its log told. A
numeric fact whose text did not parse as a number keeps the log's text (`FactNum`), so a reader
that does arithmetic checks for a number first (`number(...)`).

Adding a fact to a kind's table is adding its field here (tests/results/test_models.py checks that
every registered kind's facts are fields).
"""

from __future__ import annotations

from harness.results.models.base import Num, Record

#: a number from the log, or its text when it did not parse as one
FactNum = Num | str


def number(value: FactNum | bool | None) -> float | None:
    """The fact as a float, or None when it is missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class StartupFacts(Record):
    # --- vLLM (and the simulated engine, which logs as vLLM does)
    kv_cache_tokens: FactNum | None = None
    max_concurrency_for_tokens: FactNum | None = None
    max_concurrency: FactNum | None = None
    model_load_gib: FactNum | None = None
    model_load_s: FactNum | None = None
    kv_cache_gib: FactNum | None = None
    initial_free_gib: FactNum | None = None  # --kv-cache-memory-bytes: free GPU memory at start
    kv_cache_set_by: str | None = None  # "kv_cache_memory_bytes" when that flag sized the cache
    weights_load_s: FactNum | None = None
    init_model_s: FactNum | None = None
    num_gpu_blocks: FactNum | None = None
    graph_capture_s: FactNum | None = None
    graph_capture_gib: FactNum | None = None
    init_engine_s: FactNum | None = None
    compile_s: FactNum | None = None
    torch_compile_s: FactNum | None = None
    dynamo_s: FactNum | None = None
    engine_version: str | None = None
    attention_backend: str | None = None
    max_model_len_configured: FactNum | None = None
    max_model_len_auto_fit_from: FactNum | None = None
    max_model_len: FactNum | None = None  # the final length (after any auto-fit)
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    enforce_eager: bool | None = None
    cudagraph_mode: str | None = None
    cudagraph_sizes: list[int] | None = None
    compile_cache_dir: str | None = None
    profile_run_s: FactNum | None = None
    cudagraph_captured: dict[str, int] | None = None  # per capture bar: graphs captured
    graph_capture_bars_s: float | None = None
    warmup_compile_s: float | None = None
    compile_cache_hit: bool | None = None
    cudagraph_count: int | None = None
    # --- SGLang
    max_total_num_tokens: FactNum | None = None
    chunked_prefill_size: FactNum | None = None
    max_prefill_tokens: FactNum | None = None
    max_running_requests: FactNum | None = None
    context_len: FactNum | None = None
    available_gpu_mem_gb: FactNum | None = None
    available_cpu_mem_gb: FactNum | None = None
    # --- TGI
    max_batch_total_tokens: FactNum | None = None
    # --- llama.cpp
    n_ctx: FactNum | None = None
    n_ctx_seq: FactNum | None = None
    n_ctx_slot: FactNum | None = None
    n_slots: FactNum | None = None
    kv_unified: bool | None = None
    flash_attn: str | None = None
    # --- transformers serve
    port: FactNum | None = None
    cb_num_blocks: FactNum | None = None
    cb_max_batch_tokens: FactNum | None = None
    # --- the sweep's check against the scenario (harness.results.engine_facts.max_len_warning)
    max_model_len_warning: str | None = None
