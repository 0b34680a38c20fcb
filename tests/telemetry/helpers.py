"""Shared assertions on the `engine` block."""

from __future__ import annotations

import logging

BLOCK_KEYS = {
    "profile",
    "kv_usage",
    "kv_capacity_tokens",
    "block_size",
    "preemptions",
    "prefix_cache",
    "running",
    "waiting",
    "prompt_tokens",
    "generation_tokens",
    "spec_decode",
    "gpu_memory",
    "engine_latency_ms",
    "telemetry",
}


#: the simulated engine's own lag (harness.telemetry.block.simulator_block): only the simulator has it
SIMULATOR_KEYS = {"behind_s", "modelled_s", "behind_share", "steps", "mean_step_ms", "step_lag_ms"}
#: keys a block carries only in some runs: a KV cache sized by --kv-cache-memory-bytes; prefix
#: lookups re-counted while requests wait (the hit rate then comes from the cached prompt tokens)
OPTIONAL_KEYS = {"kv_cache_memory_bytes"}
REQUERY_KEYS = {"hit_rate_from", "lookup_hit_rate", "lookups_per_prompt_token", "cached_prompt_tokens"}


def assert_shape(block: dict) -> None:
    assert BLOCK_KEYS <= set(block) - {"simulator"} <= BLOCK_KEYS | OPTIONAL_KEYS
    if "simulator" in block:
        assert set(block["simulator"]) == SIMULATOR_KEYS and block["profile"] == "vllm"
    assert set(block["kv_usage"]) == {"mean", "p50", "p99", "max"}
    assert set(block["preemptions"]) == {"count", "per_s"}
    keys = set(block["prefix_cache"]) - {"queries", "hits", "hit_rate", "expected_hit_rate"}
    assert keys in (set(), REQUERY_KEYS), keys
    assert set(block["running"]) == set(block["waiting"]) == {"mean", "max"}
    assert set(block["engine_latency_ms"]) == {"ttft", "itl", "e2e", "queue", "prefill", "decode"}
    for v in block["engine_latency_ms"].values():
        assert {"p50", "p99", "mean", "count"} <= set(v)
    assert {"source", "scrapes", "missing_reason"} <= set(block["telemetry"])
    gm = block["gpu_memory"]
    assert (gm.get("available") is False and gm.get("reason")) or {"used_max_bytes", "total_bytes", "per_gpu"} <= set(
        gm
    )


def assert_all_null(block: dict) -> None:
    assert block["kv_usage"] == {"mean": None, "p50": None, "p99": None, "max": None}
    assert block["preemptions"] == {"count": None, "per_s": None}
    assert block["prefix_cache"]["hit_rate"] is None
    assert block["prompt_tokens"] is None and block["generation_tokens"] is None
    assert all(v["p50"] is None for v in block["engine_latency_ms"].values())


def telemetry_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "harness.telemetry" and r.levelno >= logging.WARNING]


def assert_close_tree(actual, expected, *, rel: float = 1e-6, abs: float = 1e-12, path: str = "") -> None:
    """Compare nested dicts/lists/numbers with a tolerance on the numbers.

    `pytest.approx` refuses nested mappings and (since pytest 9.1) mappings holding None, and the engine
    block has both (bucket bounds are lists; an absent metric is None): walk the tree instead."""
    import math

    where = path or "<root>"
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), f"{where}: keys {actual!r} vs {expected!r}"
        for key in expected:
            assert_close_tree(actual[key], expected[key], rel=rel, abs=abs, path=f"{path}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), (
            f"{where}: {actual!r} vs {expected!r}"
        )
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_close_tree(a, e, rel=rel, abs=abs, path=f"{path}[{i}]")
    elif isinstance(expected, bool) or expected is None or isinstance(expected, str):
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"
    elif isinstance(expected, (int, float)):
        assert isinstance(actual, (int, float)) and not isinstance(actual, bool), f"{where}: {actual!r} is not a number"
        assert math.isclose(actual, expected, rel_tol=rel, abs_tol=abs), f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"
