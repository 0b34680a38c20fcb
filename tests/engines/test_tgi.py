"""TGI: startup facts from lines in its formats, the metric families it declares (its router is a
Rust binary and its server is not on PyPI: not run here), its serving-log lines."""

from harness.engines import get_kind

from .conftest import DATA, assert_profile_reads_only_declared_names, families


def test_tgi():
    log = "2026-01-01T00:00:00.000Z  INFO text_generation_router_v3: backends/v3/src/lib.rs:125: Setting max batch total tokens to 159568\n"
    assert get_kind("tgi").startup_facts(log) == {"max_batch_total_tokens": 159568, "kv_cache_tokens": 159568}


def test_tgi_engine_facts():
    log = (
        '2026-01-01T00:00:00.000Z  INFO text_generation_launcher: Args { model_id: "m", quantize: Some(Awq), '
        "kv_cache_dtype: Some(Fp8e4m3fn), max_total_tokens: Some(4096), cuda_graphs: Some([1, 2, 4, 8]) }\n"
        "2026-01-01T00:00:03.000Z  INFO text_generation_launcher: Using Attention = flashinfer\n"
    )
    facts = get_kind("tgi").startup_facts(log)
    assert facts == {
        "max_model_len": 4096,
        "attention_backend": "flashinfer",
        "quantization": "Awq",
        "kv_cache_dtype": "Fp8e4m3fn",
        "cudagraph_sizes": [1, 2, 4, 8],
        "cudagraph_count": 4,
    }


def test_every_name_the_profile_reads_is_declared_with_its_type():
    # counters keep their name in metrics-exporter-prometheus 0.15; the `_total` spelling is a fallback
    assert_profile_reads_only_declared_names(
        "tgi", DATA / "tgi" / "tgi_db931fc_metric_families.txt", {"tgi_request_success_total"}
    )


def test_the_recording_holds_what_the_profile_promises():
    tgi = families(DATA / "tgi" / "tgi_db931fc_metric_families.txt")
    assert not any("prefix" in n or "kv_cache" in n for n in tgi)  # TGI exports no KV-usage or prefix-cache metric


def test_serving_log_lines():
    table = get_kind("tgi").log_patterns
    assert table.classify("torch.OutOfMemoryError: CUDA out of memory.") == "oom"
    assert table.classify("2026-01-01T00:00:00Z  INFO text_generation_router: Request was cancelled") == "abort"


def test_no_reset():
    tgi = get_kind("tgi")
    assert tgi.reset_path is None and tgi.reset_prefix_cache("http://127.0.0.1:9", None) == (
        "engine kind tgi has no prefix-cache reset endpoint"
    )


def test_tgi_3_startup_in_its_formats():
    """A start in the formats of TGI 2.x/3.x (not a run: TGI cannot run here): the launcher's
    `{:#?}` Args dump spreads `Some(...)` over lines, unset limits are logged as `Default ... to`,
    the default CUDA-graph sizes as `Using default cuda graphs [...]`; the v3 router's budget line."""
    facts = get_kind("tgi").startup_facts((DATA / "tgi" / "tgi_3_startup_formats.log").read_text())
    assert facts == {
        "max_batch_total_tokens": 159568,
        "kv_cache_tokens": 159568,
        "max_model_len": 8192,
        "attention_backend": "flashinfer",
        "quantization": "Awq",
        "cudagraph_sizes": [1, 2, 4, 8, 16, 32],
        "cudagraph_count": 6,
    }
    pretty = (
        "    kv_cache_dtype: Some(\n        Fp8e4m3fn,\n    ),\n    max_total_tokens: Some(\n        4096,\n    ),\n"
    )
    assert get_kind("tgi").startup_facts(pretty) == {"kv_cache_dtype": "Fp8e4m3fn", "max_model_len": 4096}


def test_tokenize_is_the_routers_form():
    tok = get_kind("tgi").tokenize
    assert tok is not None and tok.path == "/tokenize" and tok.body("m", "a b") == {"inputs": "a b"}
    answer = [{"id": 1, "text": "<s>", "start": 0, "stop": 0}, {"id": 263, "text": "a", "start": 0, "stop": 1}]
    assert tok.count(answer) == 2 and tok.count({"tokens": [1]}) is None


def test_flags_are_the_launchers_and_its_environment():
    flags = get_kind("tgi").flags
    assert set(flags.lacks()) == {"max-num-seqs"}  # a token budget admits requests, not a count
    assert flags.knob("max-model-len").change(4096) == {"max-total-tokens": 4096}
    assert flags.knob("enable-prefix-caching").change("0") == {"env:PREFIX_CACHING": "0"}
    assert flags.knob("cuda-graphs").switch_text() == "on: without --cuda-graphs; off: --cuda-graphs 0 (default on)"
