"""Kind custom: any server the sweep starts with its own command; ready and reset paths from the
sweep file, vLLM's fact lines and flag names, its /metrics profile detected from the page. Against a
real HTTP server: tests/sweep/test_launcher.py."""

from harness.engines import get_kind
from harness.sweep.models import EngineSpec


def test_paths_come_from_the_sweep_file():
    custom = get_kind("custom")
    bare = EngineSpec(kind="custom", command=["x", "{port}"])
    given = EngineSpec(kind="custom", command=["x", "{port}"], ready_path="/v1/models", reset_path="/flush")
    assert custom.ready_path_for(bare) == "/health" and custom.ready_path_for(given) == "/v1/models"
    assert custom.reset_prefix_cache("http://127.0.0.1:9", bare).startswith("engine.reset_path is not set")
    assert custom.metrics is None and custom.starts_engine


def test_reads_vllm_lines_and_takes_vllm_flags():
    custom, vllm = get_kind("custom"), get_kind("vllm")
    assert custom.facts is vllm.facts and custom.flags is vllm.flags and custom.tokenize is vllm.tokenize
    assert custom.startup_facts("GPU KV cache size: 1,234 tokens\n") == {"kv_cache_tokens": 1234}
