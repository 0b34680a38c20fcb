"""SGLang: startup facts from lines in 0.5.23's formats and older ones, the metric families 0.5.23
declares (it cannot serve on this CPU-only CI: it needs CUDA 13 packages and its CUDA kernel wheel),
its serving-log lines, reset and tokenize."""

from harness.engines import get_kind

from .conftest import DATA, assert_profile_reads_only_declared_names, families


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
        "max_total_num_tokens": 413152,
        "kv_cache_tokens": 413152,
        "chunked_prefill_size": 8192,
        "max_prefill_tokens": 16384,
        "max_running_requests": 4096,
        "context_len": 131072,
        "available_gpu_mem_gb": 12.1,
        "model_load_gib": 15.0,
        "graph_capture_s": 5.17,
        "max_model_len": 131072,
    }


def test_sglang_0_5_23_lines():
    # the startup lines as SGLang 0.5.23's own f-strings print them (scheduler.py, model_runner.py,
    # memory_pool.py, cuda_graph_setup.py of the PyPI wheel); no running server (it needs CUDA)
    facts = get_kind("sglang").startup_facts((DATA / "sglang" / "sglang_0.5.23_startup.log").read_text())
    assert facts == {
        "max_total_num_tokens": 413152,
        "kv_cache_tokens": 413152,
        "chunked_prefill_size": 8192,
        "max_prefill_tokens": 16384,
        "max_running_requests": 4096,
        "context_len": 131072,
        "available_gpu_mem_gb": 12.1,
        "model_load_gib": 15.0,
        "graph_capture_s": 5.17,
        "max_model_len": 131072,
        "kv_cache_dtype": "bfloat16",
    }
    cpu = (
        "[2026-12-01 23:10:12 TP0] max_total_num_tokens=9000, chunked_prefill_size=2048, max_prefill_tokens=16384, "
        "max_running_requests=64, context_len=4096, available_cpu_mem=20.50 GB\n"
    )
    assert get_kind("sglang").startup_facts(cpu)["available_cpu_mem_gb"] == 20.5


def test_sglang_engine_facts():
    log = (
        "[2026-01-01 00:00:01] server_args=ServerArgs(model_path='m', quantization='fp8', kv_cache_dtype='fp8_e5m2', "
        "attention_backend='fa3', context_length=None)\n"
        "[2026-01-01 00:00:09 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]\n"
    )
    facts = get_kind("sglang").startup_facts(log)
    assert facts == {
        "attention_backend": "fa3",
        "quantization": "fp8",
        "kv_cache_dtype": "fp8_e5m2",
        "cudagraph_sizes": [1, 2, 4, 8, 16, 24, 32],
        "cudagraph_count": 7,
    }
    real = get_kind("sglang").startup_facts((DATA / "sglang" / "sglang_0.5.23_startup.log").read_text())
    assert real["max_model_len"] == 131072 and real["kv_cache_dtype"] == "bfloat16"


def test_every_name_the_profile_reads_is_declared_with_its_type():
    assert_profile_reads_only_declared_names("sglang", DATA / "sglang" / "sglang_0.5.23_metric_families.txt")


def test_the_recording_holds_what_the_profile_promises():
    sgl = families(DATA / "sglang" / "sglang_0.5.23_metric_families.txt")
    assert sgl["sglang_token_usage"] == "gauge" and sgl["sglang_cache_hit_rate"] == "gauge"  # last batch only: unused
    assert sgl["sglang_num_retracted_requests_total"] == "counter"


def test_serving_log_lines():
    table = get_kind("sglang").log_patterns
    assert (
        table.classify("[2025-01-01 10:00:00] KV cache pool is full. Retract requests. #retracted_reqs: 3")
        == "preemption"
    )
    assert table.classify("[2025-01-01 10:00:00] Abort request abc") == "abort"


def test_reset_and_tokenize():
    sglang = get_kind("sglang")
    assert sglang.reset_path == "/flush_cache" and sglang.tokenize is get_kind("vllm").tokenize
    assert "--enable-metrics" in sglang.default_command(None)


def test_flags_are_sglangs_own_names_and_senses():
    flags = get_kind("sglang").flags
    assert not flags.lacks()
    spelt = {g: k.flag for g, k in flags.knobs.items()}
    assert spelt["max-num-seqs"] == "max-running-requests" and spelt["gpu-memory-utilization"] == "mem-fraction-static"
    assert spelt["max-model-len"] == "context-length" and spelt["tensor-parallel-size"] == "tp-size"
    cache = flags.knob("enable-prefix-caching")
    assert cache.switch_text() == "on: without --disable-radix-cache; off: --disable-radix-cache (default on)"
    chunked = flags.knob("enable-chunked-prefill")  # the token budget is the switch: -1 off
    assert chunked.is_on(-1) is False and chunked.is_on(8192) is True and chunked.is_on(None) is True
