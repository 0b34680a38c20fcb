"""llama.cpp's llama-server: startup facts from a real start (llama.cpp of llama-cpp-python 0.3.36)
and its verbose lines, its serving-log lines, flags; the whole kind against a real llama-server is
tests/e2e/test_llamacpp.py (slow)."""

from harness.engines import get_kind

from .conftest import DATA, assert_profile_reads_only_declared_names


def test_llamacpp_default_verbosity():
    # what a real llama-server prints at its default verbosity (llama.cpp of llama-cpp-python 0.3.36)
    facts = get_kind("llamacpp").startup_facts((DATA / "llamacpp" / "llamacpp_0.3.36_startup.log").read_text())
    assert facts == {
        "n_slots": 2,
        "n_ctx_slot": 2048,
        "kv_unified": False,
        "n_ctx": 4096,
        "kv_cache_tokens": 4096,
        "max_model_len": 2048,
    }
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
        "n_ctx": 4096,
        "kv_cache_tokens": 4096,
        "n_ctx_seq": 2048,
        "n_ctx_slot": 2048,
        "n_slots": 2,
        "kv_unified": False,
        "max_model_len": 2048,
    }


def test_llamacpp_engine_facts():
    log = (
        "build: 6123 (a0b1c2d3) with cc (GCC) 12.2.0 for x86_64-linux-gnu\n"
        "llama_context: flash_attn    = auto\n"
        "llama_kv_cache:        CPU KV buffer size =   256.00 MiB\n"
        "llama_kv_cache: size =  256.00 MiB (  2048 cells,  32 layers,  1/1 seqs), K (q8_0):  128.00 MiB, V (q8_0):  128.00 MiB\n"
    )
    facts = get_kind("llamacpp").startup_facts(log)
    assert (
        facts["engine_version"] == "6123 (a0b1c2d3)"
        and facts["flash_attn"] == "auto"
        and facts["kv_cache_dtype"] == "q8_0"
    )


def test_serving_log_lines():
    table = get_kind("llamacpp").log_patterns
    assert table.classify("slot update_slots: failed to find free space in the KV cache") == "preemption"
    assert table.classify("srv  cancel_tasks: cancel task, id_task = 3") == "abort"


def test_flags_are_llama_servers_own():
    flags = get_kind("llamacpp").flags
    spelt = {g: k.flag for g, k in flags.knobs.items() if k.flag}
    assert spelt == {
        "max-model-len": "kv-unified-per-slot",  # the per-slot limit, not --ctx-size (the pool all slots share)
        "max-num-seqs": "parallel",
        "max-num-batched-tokens": "batch-size",
        "enable-prefix-caching": "cache-prompt",
        "cuda-graphs": "env:GGML_CUDA_DISABLE_GRAPHS",
        "kv-cache-dtype": "cache-type-k",
        "speculative-config": "spec-type",
    }
    assert set(flags.lacks()) == {"gpu-memory-utilization", "enable-chunked-prefill", "tensor-parallel-size"}
    assert flags.knob("kv-cache-dtype").change("q8_0") == {"cache-type-k": "q8_0", "cache-type-v": "q8_0"}
    assert (
        flags.knob("enable-prefix-caching").switch_text() == "on: --cache-prompt; off: --no-cache-prompt (default on)"
    )
    graphs = flags.knob("cuda-graphs").switch_text()
    assert graphs == "on: without env GGML_CUDA_DISABLE_GRAPHS; off: env GGML_CUDA_DISABLE_GRAPHS=1 (default on)"


def test_tokenize_is_llama_servers_form():
    tok = get_kind("llamacpp").tokenize
    assert tok is not None and tok.path == "/tokenize" and tok.body("m", "a b") == {"content": "a b"}
    assert tok.count({"tokens": [1, 2, 3]}) == 3 and tok.count({"count": 3}) is None and tok.count([1]) is None


def test_every_name_the_profile_reads_is_declared_with_its_type():
    # the KV-usage gauge of older builds and the per-position counter (written only after drafting)
    assert_profile_reads_only_declared_names(
        "llamacpp", DATA / "llamacpp" / "llamacpp_0.3.36_metric_families.txt", {"llamacpp_kv_cache_usage_ratio"}
    )
