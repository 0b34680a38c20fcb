"""vLLM: startup facts from real logs (the CPU build, 0.26.0 on an H200) and lines in its formats,
/metrics read from a recorded 0.26.0 page, its serving-log lines, flags, reset and tokenize."""

import pytest

from harness.engines import get_kind

from .conftest import DATA, recorded, window_block


def test_vllm_cpu_build_real_log():
    facts = get_kind("vllm").startup_facts((DATA / "vllm" / "vllm_cpu_0.32_startup.log").read_text())
    assert facts == {
        "kv_cache_tokens": 524288,
        "max_concurrency_for_tokens": 2048,
        "max_concurrency": 256.0,
        "kv_cache_gib": 1.0,
        "weights_load_s": 0.02,
        "init_model_s": 0.134131,
        "init_engine_s": 34.75,
        "max_model_len": 2048,
        "warmup_compile_s": 33.0,  # the stamps of "Warming up model for the compilation" and "Warming up done"
    }


def test_vllm_cpu_build_real_cold_start_log():
    """A whole cold start of the real CPU build (vllm-cpu 0.32.0, tiny model, fresh VLLM_CACHE_ROOT,
    captured on this project's loaded 2-core machine: hence the minutes)."""
    facts = get_kind("vllm").startup_facts((DATA / "vllm" / "vllm_cpu_0.32_cold_start.log").read_text())
    assert facts["engine_version"] == "0.32.0"
    assert (
        facts["max_model_len"] == facts["max_model_len_configured"] == 2048
        and "max_model_len_auto_fit_from" not in facts
    )
    assert facts["quantization"] is None and facts["kv_cache_dtype"] == "auto" and facts["enforce_eager"] is False
    # no CUDA graphs on CPU: mode NONE, no sizes; no attention-backend line either (CPU_ATTN is chosen silently)
    assert facts["cudagraph_mode"] == "NONE" and facts["cudagraph_sizes"] == [] and facts["cudagraph_count"] == 0
    assert "attention_backend" not in facts
    # the AOT compile cache was written under the start's VLLM_CACHE_ROOT: a miss
    assert (
        facts["compile_cache_hit"] is False and "/torch_compile_cache/torch_aot_compile/" in facts["compile_cache_dir"]
    )
    # compile time from the warmup lines' stamps (the CPU build logs no compile figure)
    assert facts["warmup_compile_s"] == 324.0 and facts["init_engine_s"] == 326.91
    assert facts["weights_load_s"] == 0.13 and facts["init_model_s"] == 1.395911 and facts["profile_run_s"] == 0.72


def test_vllm_gpu_one_line_format():
    log = """
(EngineCore_DP0 pid=1) INFO 05-01 10:00:01 [gpu_model_runner.py:2000] Model loading took 14.9889 GiB memory and 5.382 seconds
(EngineCore_DP0 pid=1) INFO 05-01 10:00:09 [gpu_worker.py:300] Available KV cache memory: 51.25 GiB
(EngineCore_DP0 pid=1) INFO 05-01 10:00:09 [kv_cache_utils.py:1000] GPU KV cache size: 419,840 tokens, Maximum concurrency for 32,768 tokens per request: 12.81x
Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:04<00:00, 15.2it/s]
(EngineCore_DP0 pid=1) INFO 05-01 10:00:20 [gpu_model_runner.py:3000] Graph capturing finished in 11 secs, took 0.54 GiB
(EngineCore_DP0 pid=1) INFO 05-01 10:00:20 [core.py:200] init engine (profile, create kv cache, warmup model) took 38.47 s (compilation: 21.03 s)
"""
    facts = get_kind("vllm").startup_facts(log)
    assert facts == {
        "kv_cache_tokens": 419840,
        "max_concurrency_for_tokens": 32768,
        "max_concurrency": 12.81,
        "model_load_gib": 14.9889,
        "model_load_s": 5.382,
        "kv_cache_gib": 51.25,
        "graph_capture_s": 11,
        "graph_capture_gib": 0.54,
        "init_engine_s": 38.47,
        "compile_s": 21.03,
        "max_model_len": 32768,
        "cudagraph_captured": {"mixed prefill-decode PIECEWISE": 67},
        "graph_capture_bars_s": 4.408,
    }


def test_vllm_older_two_line_format_and_ansi():
    log = (
        "\x1b[1;36m(VllmWorker rank=0 pid=7)\x1b[0m INFO 01-01 00:00:00 [kv_cache_utils.py:634] GPU KV cache size: 1,234 tokens\n"
        "INFO 01-01 00:00:00 [kv_cache_utils.py:637] Maximum concurrency for 2,048 tokens per request: 3.52x\n"
        "INFO # GPU blocks: 77, # CPU blocks: 2048\n"
    )
    assert get_kind("vllm").startup_facts(log) == {
        "kv_cache_tokens": 1234,
        "max_concurrency_for_tokens": 2048,
        "max_concurrency": 3.52,
        "num_gpu_blocks": 77,
        "max_model_len": 2048,
    }


def test_vllm_0_26_gpu_log_with_kv_cache_memory_bytes():
    """vLLM 0.26.0 (V2 model runner) on a GPU with --kv-cache-memory-bytes: the KV cache is
    'reserved', not profiled (no 'Available KV cache memory' line), and the capture bars carry one
    field, '(PIECEWISE)'. Lines in 0.26.0's formats (its gpu_worker.py, model_runner.py,
    cudagraph_utils.py), as GPU_VLLM.md saw them on the H200."""
    facts = get_kind("vllm").startup_facts((DATA / "vllm" / "vllm_0.26.0_h200_kv_bytes.log").read_text())
    assert facts["kv_cache_gib"] == 1.0 and facts["kv_cache_set_by"] == "kv_cache_memory_bytes"
    assert facts["initial_free_gib"] == 138.21
    assert facts["cudagraph_captured"] == {"PIECEWISE": 51, "FULL": 51}
    assert facts["graph_capture_bars_s"] == round(51 / 34.02 + 51 / 57.31, 3)
    assert facts["cudagraph_count"] == 51 and facts["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert facts["kv_cache_tokens"] == 32768 and facts["max_model_len"] == 4096
    assert facts["model_load_s"] == 0.912402 and facts["torch_compile_s"] == 16.84 and facts["init_engine_s"] == 41.75
    assert facts["compile_cache_hit"] is False and facts["engine_version"] == "0.26.0"


def test_vllm_profiled_kv_cache_is_not_called_set():
    facts = get_kind("vllm").startup_facts(
        "INFO 12-03 13:01:54 [gpu_worker.py:561] Available KV cache memory: 127.85 GiB\n"
    )
    assert facts["kv_cache_gib"] == 127.85 and "kv_cache_set_by" not in facts


def test_vllm_0_26_real_h200_startup_log():
    """A recorded start of vLLM 0.26.0 on the lent H200 (results/examples/gpu-h200-vllm-small-kv:
    the Llama-3-8B shape, --kv-cache-memory-bytes 768 MiB, --max-model-len auto, compile cache warm)."""
    facts = get_kind("vllm").startup_facts((DATA / "vllm" / "vllm_0.26.0_h200_startup.log").read_text())
    assert facts["kv_cache_gib"] == 0.75 and facts["kv_cache_set_by"] == "kv_cache_memory_bytes"
    assert facts["initial_free_gib"] == 139.29
    assert (
        facts["max_model_len"] == 6144
        and facts["max_model_len_auto_fit_from"] == 8192
        and facts["kv_cache_tokens"] == 6144
    )
    assert facts["cudagraph_captured"] == {"PIECEWISE": 51, "FULL": 51} and facts["graph_capture_bars_s"] == 6.021
    assert facts["model_load_gib"] == 14.96 and facts["model_load_s"] == 4.602236 and facts["init_engine_s"] == 30.5
    assert (
        facts["compile_cache_hit"] is True
        and facts["engine_version"] == "0.26.0"
        and facts["attention_backend"] == "FLASH_ATTN"
    )


def test_vllm_0_26_requeried_prefix_lookups_and_fixed_kv_cache() -> None:
    """vLLM 0.26.0 under queueing with --kv-cache-memory-bytes (tests/engines/data/vllm): lookups
    outnumber prompt tokens 9.2x, so hits/queries (21.6%) weighs requests by their admission
    attempts; the cached prompt tokens, counted once per request, give 50%. The cache's size was
    set by the flag, and the block says so."""
    text = recorded("vllm", "vllm_0.26.0_kv_bytes_queueing.txt")
    b = window_block("vllm", *text.split("=== scrape\n"))
    pc = b["prefix_cache"]
    assert pc["queries"] == 13447440 and pc["hits"] == 2900000
    assert pc["lookups_per_prompt_token"] == pytest.approx(13447440 / 1461600)
    assert pc["lookup_hit_rate"] == pytest.approx(2900000 / 13447440)
    assert pc["hit_rate"] == pytest.approx(0.5) and pc["hit_rate_from"] == "prompt_tokens_cached"
    assert b["kv_cache_memory_bytes"] == 1073741824 and b["kv_capacity_tokens"] == 32768
    assert b["preemptions"]["count"] == 283


def test_serving_log_lines():
    table = get_kind("vllm").log_patterns
    assert (
        table.classify(
            "WARNING 12-01 10:00:07 scheduler.py:1560] Sequence group 5 is preempted by "
            "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space."
        )
        == "preemption"
    )
    assert (
        table.classify("(APIServer pid=1) INFO 12-01 10:00:06 [async_llm.py:400] Aborted request chatcmpl-abc.")
        == "abort"
    )
    assert table.classify("Engine 000: Avg prompt throughput: 1.0 tokens/s") is None


def test_flags_are_the_guides_names():
    flags = get_kind("vllm").flags
    assert flags.knob("max_num_seqs").flag == "max-num-seqs" and not flags.lacks()
    graphs = flags.knob("cuda-graphs")
    assert (graphs.flag, graphs.on, graphs.off, graphs.default_on) == ("enforce-eager", None, True, True)


def test_launch_reset_and_tokenize():
    vllm = get_kind("vllm")
    assert vllm.default_command(None)[:3] == ["vllm", "serve", "{model}"]
    assert vllm.default_env(None) == {"VLLM_SERVER_DEV_MODE": "1"}  # enables the reset endpoint
    assert vllm.reset_path == "/reset_prefix_cache" and "VLLM_CACHE_ROOT" in vllm.cache_env
    tok = vllm.tokenize
    assert tok.path == "/tokenize" and tok.body("m", "a b") == {
        "model": "m",
        "prompt": "a b",
        "add_special_tokens": False,
    }
    assert tok.count({"count": 7, "tokens": [1]}) == 7 and tok.count({"tokens": [1, 2]}) == 2 and tok.count([1]) is None
