"""The simulator's startup phases: compile cache (cold vs warm), --enforce-eager, CUDA-graph capture
sizes and the facts the sweep reads back from its log lines (real processes, real log files)."""

from __future__ import annotations

from harness.engines import get_kind

PHASES = [
    "--sim-load-s",
    "0.05",
    "--sim-compile-s",
    "0.5",
    "--sim-compile-cached-s",
    "0.05",
    "--sim-profile-s",
    "0.02",
    "--sim-capture-s",
    "0.1",
    "--sim-init-s",
    "0.01",
]


def _facts(srv) -> dict:
    return get_kind("sim").startup_facts(srv.stdout() + srv.stderr())


def test_compile_cache_makes_the_second_start_load_instead_of_compile(sim, tmp_path):
    cache = tmp_path / "cache"
    cold = _facts(sim("--max-num-seqs", "16", "--sim-compile-cache", str(cache), *PHASES))
    warm = _facts(sim("--max-num-seqs", "16", "--sim-compile-cache", str(cache), *PHASES))
    assert cold["compile_cache_hit"] is False and warm["compile_cache_hit"] is True
    assert cold["compile_cache_dir"] == warm["compile_cache_dir"] and cold["compile_cache_dir"].startswith(str(cache))
    assert warm["torch_compile_s"] < cold["torch_compile_s"]
    # another token budget is another compiled graph: cold again
    other = _facts(
        sim("--max-num-seqs", "16", "--max-num-batched-tokens", "4096", "--sim-compile-cache", str(cache), *PHASES)
    )
    assert other["compile_cache_hit"] is False


def test_vllm_cache_root_is_honoured(sim, tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "root"))
    facts = _facts(sim("--max-num-seqs", "8", *PHASES))
    assert facts["compile_cache_dir"].startswith(str(tmp_path / "root" / "torch_compile_cache"))


def test_no_cache_dir_no_cache_line(sim, monkeypatch):
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    facts = _facts(sim("--max-num-seqs", "8"))
    assert "compile_cache_dir" not in facts and facts["compile_cache_hit"] is False


def test_capture_sizes_follow_max_num_seqs_and_the_facts_read_them(sim):
    facts = _facts(sim("--max-num-seqs", "16"))
    assert facts["cudagraph_sizes"] == [1, 2, 4, 8, 16, 24, 32]  # vLLM: up to min(2 x 16, 512)
    assert facts["cudagraph_count"] == 7 and facts["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert facts["cudagraph_captured"] == {"mixed prefill-decode PIECEWISE": 7, "decode FULL": 5}
    assert facts["attention_backend"] == "FLASH_ATTN" and facts["engine_version"] == "0.33.0"
    big = _facts(sim("--max-num-seqs", "256"))
    assert big["cudagraph_count"] == 51 and big["cudagraph_sizes"][-1] == 512


def test_explicit_sizes_and_mode(sim):
    facts = _facts(
        sim("--max-num-seqs", "64", "-cc", '{"cudagraph_capture_sizes": [1, 8, 64], "cudagraph_mode": "PIECEWISE"}')
    )
    assert facts["cudagraph_sizes"] == [1, 8, 64] and facts["cudagraph_mode"] == "PIECEWISE"
    assert facts["cudagraph_captured"] == {"mixed prefill-decode PIECEWISE": 3}


def test_enforce_eager_skips_compile_and_capture(sim, tmp_path):
    facts = _facts(sim("--enforce-eager", "--sim-compile-cache", str(tmp_path), *PHASES))
    assert facts["enforce_eager"] is True and facts["cudagraph_mode"] == "NONE" and facts["cudagraph_count"] == 0
    assert "torch_compile_s" not in facts and "graph_capture_s" not in facts and "compile_cache_hit" not in facts
    assert facts["init_engine_s"] < 0.5  # profiling only (compile alone would be 0.5 s)


def test_auto_fit_max_model_len_quantization_and_kv_dtype(sim):
    facts = _facts(sim("--sim-gpu-memory-gib", "16", "--max-model-len", "auto", "--kv-cache-dtype", "fp8", "-q", "fp8"))
    assert facts["max_model_len_auto_fit_from"] == 131072 == facts["max_model_len_configured"]
    assert facts["max_model_len"] == facts["kv_cache_tokens"] < 131072
    assert facts["quantization"] == "fp8" and facts["kv_cache_dtype"] == "fp8"


def test_bad_compilation_config_is_one_line_exit_2():
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "harness.sim", "-cc", '{"cudagraph_mode": "SOMETIMES"}'],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "cudagraph_mode" in r.stderr
