"""The simulated engine: vLLM's parts (it prints vLLM's lines and serves vLLM's names), its own
launcher, no tokenize endpoint. Its live startup log is checked in tests/sim/test_sim_startup_phases.py."""

from harness.engines import get_kind


def test_sim_reads_vllm_lines():
    log = "GPU KV cache size: 1,234 tokens, Maximum concurrency for 2,048 tokens per request: 0.60x\n"
    assert get_kind("sim").startup_facts(log)["kv_cache_tokens"] == 1234


def test_shares_vllms_parts_but_not_its_launcher():
    sim, vllm = get_kind("sim"), get_kind("vllm")
    assert sim.metrics is vllm.metrics and sim.log_patterns is vllm.log_patterns and sim.flags is vllm.flags
    assert sim.reset_path == vllm.reset_path and sim.telemetry_profile == "vllm"
    assert sim.default_command(None)[:3] == ["{python}", "-m", "harness.sim"] and sim.default_env(None) == {}
    assert sim.tokenize is None and "built-in words" in sim.lacks["tokenize"]
