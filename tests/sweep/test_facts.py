"""Startup-log facts per engine kind, on lines in the engines' real formats, and the failure hint."""

from harness.sweep.engines import failure_hint, get_kind

from .conftest import DATA


def test_vllm_cpu_build_real_log():
    facts = get_kind("vllm").startup_facts((DATA / "vllm_cpu_0.32_startup.log").read_text())
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
    facts = get_kind("vllm").startup_facts((DATA / "vllm_cpu_0.32_cold_start.log").read_text())
    assert facts["engine_version"] == "0.32.0"
    assert facts["max_model_len"] == facts["max_model_len_configured"] == 2048 and "max_model_len_auto_fit_from" not in facts
    assert facts["quantization"] is None and facts["kv_cache_dtype"] == "auto" and facts["enforce_eager"] is False
    # no CUDA graphs on CPU: mode NONE, no sizes; no attention-backend line either (CPU_ATTN is chosen silently)
    assert facts["cudagraph_mode"] == "NONE" and facts["cudagraph_sizes"] == [] and facts["cudagraph_count"] == 0
    assert "attention_backend" not in facts
    # the AOT compile cache was written under the start's VLLM_CACHE_ROOT: a miss
    assert facts["compile_cache_hit"] is False and "/torch_compile_cache/torch_aot_compile/" in facts["compile_cache_dir"]
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
        "kv_cache_tokens": 419840, "max_concurrency_for_tokens": 32768, "max_concurrency": 12.81,
        "model_load_gib": 14.9889, "model_load_s": 5.382, "kv_cache_gib": 51.25,
        "graph_capture_s": 11, "graph_capture_gib": 0.54, "init_engine_s": 38.47, "compile_s": 21.03,
        "max_model_len": 32768, "cudagraph_captured": {"mixed prefill-decode PIECEWISE": 67}, "graph_capture_bars_s": 4.408,
    }


def test_vllm_older_two_line_format_and_ansi():
    log = (
        "\x1b[1;36m(VllmWorker rank=0 pid=7)\x1b[0m INFO 01-01 00:00:00 [kv_cache_utils.py:634] GPU KV cache size: 1,234 tokens\n"
        "INFO 01-01 00:00:00 [kv_cache_utils.py:637] Maximum concurrency for 2,048 tokens per request: 3.52x\n"
        "INFO # GPU blocks: 77, # CPU blocks: 2048\n"
    )
    assert get_kind("vllm").startup_facts(log) == {
        "kv_cache_tokens": 1234, "max_concurrency_for_tokens": 2048, "max_concurrency": 3.52, "num_gpu_blocks": 77, "max_model_len": 2048,
    }


def test_sim_reads_vllm_lines():
    log = "GPU KV cache size: 1,234 tokens, Maximum concurrency for 2,048 tokens per request: 0.60x\n"
    assert get_kind("sim").startup_facts(log)["kv_cache_tokens"] == 1234


def test_sglang_older_lines():
    log = (
        "[2026-01-01 00:00:05 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.1 GB, mem usage=15.0 GB.\n"
        "[2026-01-01 00:00:06 TP0] KV Cache is allocated. #tokens: 413152, K size: 25.2 GB, V size: 25.2 GB\n"
        "[2026-01-01 00:00:12 TP0] Capture cuda graph end. Time elapsed: 5.17 s. mem usage=0.30 GB. avail mem=12.1 GB.\n"
        "[2026-01-01 00:00:12 TP0] max_total_num_tokens=413152, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=4096, context_len=131072, available_gpu_mem=12.10 GB\n"
        "[2026-01-01 00:00:20] The server is fired up and ready to roll!\n"
    )
    assert get_kind("sglang").startup_facts(log) == {
        "max_total_num_tokens": 413152, "kv_cache_tokens": 413152, "chunked_prefill_size": 8192,
        "max_prefill_tokens": 16384, "max_running_requests": 4096, "context_len": 131072,
        "available_gpu_mem_gb": 12.1, "model_load_gib": 15.0, "graph_capture_s": 5.17, "max_model_len": 131072,
    }


def test_sglang_0_5_23_lines():
    # the startup lines as SGLang 0.5.23's own f-strings print them (scheduler.py, model_runner.py,
    # memory_pool.py, cuda_graph_setup.py of the PyPI wheel); no running server (it needs CUDA)
    facts = get_kind("sglang").startup_facts((DATA / "sglang_0.5.23_startup.log").read_text())
    assert facts == {
        "max_total_num_tokens": 413152, "kv_cache_tokens": 413152, "chunked_prefill_size": 8192,
        "max_prefill_tokens": 16384, "max_running_requests": 4096, "context_len": 131072,
        "available_gpu_mem_gb": 12.1, "model_load_gib": 15.0, "graph_capture_s": 5.17,
        "max_model_len": 131072, "kv_cache_dtype": "bfloat16",
    }
    cpu = "[2026-12-01 23:10:12 TP0] max_total_num_tokens=9000, chunked_prefill_size=2048, max_prefill_tokens=16384, " \
          "max_running_requests=64, context_len=4096, available_cpu_mem=20.50 GB\n"
    assert get_kind("sglang").startup_facts(cpu)["available_cpu_mem_gb"] == 20.5


def test_tgi():
    log = '2026-01-01T00:00:00.000Z  INFO text_generation_router_v3: backends/v3/src/lib.rs:125: Setting max batch total tokens to 159568\n'
    assert get_kind("tgi").startup_facts(log) == {"max_batch_total_tokens": 159568, "kv_cache_tokens": 159568}


def test_tgi_engine_facts():
    log = (
        '2026-01-01T00:00:00.000Z  INFO text_generation_launcher: Args { model_id: "m", quantize: Some(Awq), '
        'kv_cache_dtype: Some(Fp8e4m3fn), max_total_tokens: Some(4096), cuda_graphs: Some([1, 2, 4, 8]) }\n'
        '2026-01-01T00:00:03.000Z  INFO text_generation_launcher: Using Attention = flashinfer\n'
    )
    facts = get_kind("tgi").startup_facts(log)
    assert facts == {"max_model_len": 4096, "attention_backend": "flashinfer", "quantization": "Awq",
                     "kv_cache_dtype": "Fp8e4m3fn", "cudagraph_sizes": [1, 2, 4, 8], "cudagraph_count": 4}


def test_llamacpp_default_verbosity():
    # what a real llama-server prints at its default verbosity (llama.cpp of llama-cpp-python 0.3.36)
    facts = get_kind("llamacpp").startup_facts((DATA / "llamacpp_0.3.36_startup.log").read_text())
    assert facts == {"n_slots": 2, "n_ctx_slot": 2048, "kv_unified": False, "n_ctx": 4096, "kv_cache_tokens": 4096,
                     "max_model_len": 2048}
    unified = "srv    load_model: initializing, n_slots = 4, n_ctx_slot = 8192, kv_unified = 'true'\n"
    assert get_kind("llamacpp").startup_facts(unified)["kv_cache_tokens"] == 8192


def test_llamacpp_verbose_context_lines():
    # the llama_context lines appear only at a higher -lv; when present they are taken as printed
    log = (
        "llama_context: n_ctx                 = 4096\n"
        "llama_context: n_ctx_seq             = 2048\n"
        "llama_context: kv_unified            = false\n"
        "srv    load_model: initializing, n_slots = 2, n_ctx_slot = 2048, kv_unified = 'false'\n"
    )
    assert get_kind("llamacpp").startup_facts(log) == {
        "n_ctx": 4096, "kv_cache_tokens": 4096, "n_ctx_seq": 2048, "n_ctx_slot": 2048, "n_slots": 2, "kv_unified": False,
        "max_model_len": 2048,
    }


def test_llamacpp_engine_facts():
    log = ("build: 6123 (a0b1c2d3) with cc (GCC) 12.2.0 for x86_64-linux-gnu\n"
           "llama_context: flash_attn    = auto\n"
           "llama_kv_cache:        CPU KV buffer size =   256.00 MiB\n"
           "llama_kv_cache: size =  256.00 MiB (  2048 cells,  32 layers,  1/1 seqs), K (q8_0):  128.00 MiB, V (q8_0):  128.00 MiB\n")
    facts = get_kind("llamacpp").startup_facts(log)
    assert facts["engine_version"] == "6123 (a0b1c2d3)" and facts["flash_attn"] == "auto" and facts["kv_cache_dtype"] == "q8_0"


def test_sglang_engine_facts():
    log = ("[2026-01-01 00:00:01] server_args=ServerArgs(model_path='m', quantization='fp8', kv_cache_dtype='fp8_e5m2', "
           "attention_backend='fa3', context_length=None)\n"
           "[2026-01-01 00:00:09 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]\n")
    facts = get_kind("sglang").startup_facts(log)
    assert facts == {"attention_backend": "fa3", "quantization": "fp8", "kv_cache_dtype": "fp8_e5m2",
                     "cudagraph_sizes": [1, 2, 4, 8, 16, 24, 32], "cudagraph_count": 7}
    real = get_kind("sglang").startup_facts((DATA / "sglang_0.5.23_startup.log").read_text())
    assert real["max_model_len"] == 131072 and real["kv_cache_dtype"] == "bfloat16"


def test_failure_hint_real_vllm_failed_start():
    hint = failure_hint((DATA / "vllm_cpu_0.32_failed_start.log").read_text())
    assert hint.startswith("ValueError: To serve at least one request with the model's max seq len (2048)")


def test_failure_hint_other_shapes():
    assert failure_hint("usage: vllm serve [-h]\nvllm serve: error: unrecognized arguments: --bogus 1\n") == (
        "vllm serve: error: unrecognized arguments: --bogus 1"
    )
    assert failure_hint("Traceback (most recent call last):\nRuntimeError: Engine core initialization failed.") == (
        "RuntimeError: Engine core initialization failed."
    )
    assert failure_hint("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n").startswith("torch.OutOfMemoryError")
    assert failure_hint("all good\n") is None


def test_vllm_0_26_gpu_log_with_kv_cache_memory_bytes():
    """vLLM 0.26.0 (V2 model runner) on a GPU with --kv-cache-memory-bytes: the KV cache is
    'reserved', not profiled (no 'Available KV cache memory' line), and the capture bars carry one
    field, '(PIECEWISE)'. Lines in 0.26.0's formats (its gpu_worker.py, model_runner.py,
    cudagraph_utils.py), as GPU_VLLM.md saw them on the H200."""
    facts = get_kind("vllm").startup_facts((DATA / "vllm_0.26.0_h200_kv_bytes.log").read_text())
    assert facts["kv_cache_gib"] == 1.0 and facts["kv_cache_set_by"] == "kv_cache_memory_bytes"
    assert facts["initial_free_gib"] == 138.21
    assert facts["cudagraph_captured"] == {"PIECEWISE": 51, "FULL": 51}
    assert facts["graph_capture_bars_s"] == round(51 / 34.02 + 51 / 57.31, 3)
    assert facts["cudagraph_count"] == 51 and facts["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert facts["kv_cache_tokens"] == 32768 and facts["max_model_len"] == 4096
    assert facts["model_load_s"] == 0.912402 and facts["torch_compile_s"] == 16.84 and facts["init_engine_s"] == 41.75
    assert facts["compile_cache_hit"] is False and facts["engine_version"] == "0.26.0"


def test_vllm_profiled_kv_cache_is_not_called_set():
    facts = get_kind("vllm").startup_facts("INFO 12-03 13:01:54 [gpu_worker.py:561] Available KV cache memory: 127.85 GiB\n")
    assert facts["kv_cache_gib"] == 127.85 and "kv_cache_set_by" not in facts


def test_vllm_0_26_real_h200_startup_log():
    """A recorded start of vLLM 0.26.0 on the lent H200 (results/examples/gpu-h200-vllm-small-kv:
    the Llama-3-8B shape, --kv-cache-memory-bytes 768 MiB, --max-model-len auto, compile cache warm)."""
    facts = get_kind("vllm").startup_facts((DATA / "vllm_0.26.0_h200_startup.log").read_text())
    assert facts["kv_cache_gib"] == 0.75 and facts["kv_cache_set_by"] == "kv_cache_memory_bytes"
    assert facts["initial_free_gib"] == 139.29
    assert facts["max_model_len"] == 6144 and facts["max_model_len_auto_fit_from"] == 8192 and facts["kv_cache_tokens"] == 6144
    assert facts["cudagraph_captured"] == {"PIECEWISE": 51, "FULL": 51} and facts["graph_capture_bars_s"] == 6.021
    assert facts["model_load_gib"] == 14.96 and facts["model_load_s"] == 4.602236 and facts["init_engine_s"] == 30.5
    assert facts["compile_cache_hit"] is True and facts["engine_version"] == "0.26.0" and facts["attention_backend"] == "FLASH_ATTN"
