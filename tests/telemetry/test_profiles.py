"""Profiles: each engine's names -> canonical quantities, window deltas on hand-written pages."""

from __future__ import annotations

import pytest

from harness.engines import detect_profile, profiles
from harness.errors import UserError
from harness.telemetry.block import build_block
from harness.telemetry.exposition import parse
from harness.telemetry.window import WindowAccumulator

from . import pages


def window(profile_name: str, *texts: str) -> WindowAccumulator:
    profile = profiles().get(profile_name)
    snaps = [parse(t, float(i * 10)) for i, t in enumerate(texts)]
    acc = WindowAccumulator(profile, snaps[0])
    for s in snaps[1:]:
        acc.add(s)
    return acc


def block(profile_name: str, *texts: str, expected: float | None = None) -> dict:
    acc = window(profile_name, *texts)
    return build_block(acc, source="direct", scrapes=acc.scrapes, expected_hit_rate=expected)


def test_registry_lists_all_engines_and_rejects_unknown() -> None:
    assert set(profiles().names()) == {"vllm", "sglang", "tgi", "llamacpp"}
    with pytest.raises(UserError, match="choose one of: llamacpp, sglang, tgi, vllm"):
        profiles().get("vlm")


@pytest.mark.parametrize(
    "text, expected",
    [
        (pages.VLLM_A, "vllm"),
        (pages.VLLM_OLD_A, "vllm"),
        (pages.SGLANG_A, "sglang"),
        (pages.TGI_A, "tgi"),
        (pages.LLAMACPP_A, "llamacpp"),
        ("python_gc_objects_collected_total 1\nprocess_cpu_seconds_total 2\n", None),
    ],
)
def test_detection_from_prefixes(text: str, expected: str | None) -> None:
    found = detect_profile(parse(text, 0).names())
    assert (found.name if found else None) == expected


def test_vllm_current_names_two_engines() -> None:
    b = block("vllm", pages.VLLM_A, pages.VLLM_B, pages.VLLM_C, expected=0.8)
    d = pages.VLLM_DELTAS
    assert b["profile"] == "vllm"
    assert b["preemptions"]["count"] == d["preemptions"]
    assert b["preemptions"]["per_s"] == pytest.approx(d["preemptions"] / 20.0)
    assert b["prefix_cache"] == {"queries": 8000, "hits": 6000, "hit_rate": 0.75, "expected_hit_rate": 0.8}
    assert (b["prompt_tokens"], b["generation_tokens"]) == (d["prompt_tokens"], d["generation_tokens"])
    # KV usage: mean over the two engines per scrape (0.15, 0.6, 0.9), then stats over scrapes
    assert b["kv_usage"]["mean"] == pytest.approx(0.55)
    assert b["kv_usage"]["max"] == pytest.approx(0.9)
    assert b["kv_usage"]["p50"] == pytest.approx(0.6)
    assert b["running"] == {"mean": pytest.approx(31 / 3), "max": 16.0}
    assert b["waiting"] == {"mean": pytest.approx(8 / 3), "max": 5.0}
    assert b["kv_capacity_tokens"] == d["kv_capacity_tokens"] and b["block_size"] == 16
    ttft = b["engine_latency_ms"]["ttft"]
    assert ttft["count"] == 50
    assert ttft["mean"] == pytest.approx(15.0 / 50 * 1000)
    assert ttft["p50"] == pytest.approx(212.5)  # rank 25 in (0.1, 0.25]: 0.1 + 0.15 * 15/20
    assert ttft["p99"] == pytest.approx(975.0)  # rank 49.5 in (0.5, 1.0]: 0.5 + 0.5 * 9.5/10
    assert ttft["p50_bucket_ms"] == [100.0, 250.0]
    assert b["engine_latency_ms"]["e2e"] == {"p50": None, "p99": None, "mean": None, "count": None}
    assert b["spec_decode"] is None


def test_vllm_old_renamed_names() -> None:
    b = block("vllm", pages.VLLM_OLD_A, pages.VLLM_OLD_B)
    assert b["kv_usage"]["max"] == 0.75
    assert b["preemptions"]["count"] == 3
    assert b["prefix_cache"]["hit_rate"] == pytest.approx(200 / 400)
    itl = b["engine_latency_ms"]["itl"]  # time_per_output_token_seconds
    assert itl["count"] == 100 and itl["mean"] == pytest.approx(25.0)
    # the median lies in the first bucket (0-25 ms): only "below 25 ms" is known, no made-up 13.9 (audit D8)
    assert itl["p50"] is None and itl["p50_bucket_ms"] == [0.0, 25.0]


def test_vllm_deprecation_period_counts_once() -> None:
    """Old and new names side by side (0.9/0.10): the current name wins, nothing is doubled."""
    b = block("vllm", pages.VLLM_BOTH_A, pages.VLLM_BOTH_B)
    assert b["prefix_cache"]["queries"] == 400 and b["prefix_cache"]["hits"] == 200
    assert b["kv_usage"]["mean"] == pytest.approx(0.5)


def test_sglang_ranks_retractions_and_cached_tokens() -> None:
    b = block("sglang", pages.SGLANG_A, pages.SGLANG_B, expected=0.6)
    d = pages.SGLANG_DELTAS
    assert b["preemptions"]["count"] == d["preemptions"]  # tp ranks are not double counted
    assert b["prefix_cache"]["queries"] == d["prefix_queries"] and b["prefix_cache"]["hits"] == d["prefix_hits"]
    assert b["prefix_cache"]["hit_rate"] == pytest.approx(6000 / 9000)
    assert b["running"]["max"] == 30.0 and b["waiting"]["max"] == 12.0
    assert b["kv_usage"]["max"] == pytest.approx(0.95)
    assert b["kv_capacity_tokens"] == 500000 and b["block_size"] == 1
    assert b["generation_tokens"] == 4000
    assert b["spec_decode"] == {
        "acceptance_rate": pytest.approx(0.6),
        "mean_acceptance_length": pytest.approx(3.0),
        "per_position": None,
    }
    assert b["engine_latency_ms"]["e2e"]["count"] == d["e2e_count"]
    assert b["engine_latency_ms"]["e2e"]["p50"] == pytest.approx(1000 + 1000 * (20 - 10) / 30)


def test_sglang_total_cache_source_is_not_double_counted() -> None:
    a = pages.SGLANG_A + 'sglang:cached_tokens_total{cache_source="total",engine_type="unified",model_name="q"} 200\n'
    b_ = pages.SGLANG_B + 'sglang:cached_tokens_total{cache_source="total",engine_type="unified",model_name="q"} 6200\n'
    assert block("sglang", a, b_)["prefix_cache"]["hits"] == 6000


def test_tgi_budget_ratio_and_token_sums() -> None:
    b = block("tgi", pages.TGI_A, pages.TGI_B)
    assert b["prompt_tokens"] == 2000 and b["generation_tokens"] == 4000
    assert b["kv_usage"]["max"] == pytest.approx(0.75)
    assert b["kv_capacity_tokens"] == 200000
    assert b["running"]["max"] == 16 and b["waiting"]["max"] == 4
    e2e = b["engine_latency_ms"]["e2e"]
    assert e2e["count"] == 20 and e2e["p50"] == pytest.approx(750.0) and e2e["mean"] == pytest.approx(700.0)
    assert b["preemptions"]["count"] is None and b["prefix_cache"]["hit_rate"] is None
    assert b["engine_latency_ms"]["ttft"]["count"] is None


def test_llamacpp_slots_and_tokens() -> None:
    b = block("llamacpp", pages.LLAMACPP_A, pages.LLAMACPP_B)
    # 1000 prompt tokens computed + 600 reused from slot caches: all prompt tokens are both
    assert b["prompt_tokens"] == 1600 and b["generation_tokens"] == 500
    assert b["prefix_cache"]["queries"] == 1600 and b["prefix_cache"]["hits"] == 600
    assert b["prefix_cache"]["hit_rate"] == pytest.approx(600 / 1600)
    assert b["running"] == {"mean": 2.0, "max": 4.0} and b["waiting"]["max"] == 2.0
    assert b["kv_usage"] == {"mean": None, "p50": None, "p99": None, "max": None}
    assert b["kv_capacity_tokens"] is None


def test_vllm_spec_decode_per_position() -> None:
    def page(drafts: int, toks: int, acc: int, per: tuple[int, int, int]) -> str:
        lines = [
            f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}',
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {toks}',
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {acc}',
        ] + [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {v}'
            for i, v in enumerate(per)
        ]
        return "\n".join(lines) + "\n"

    b = block("vllm", page(10, 30, 15, (8, 5, 2)), page(110, 330, 195, (88, 65, 42)))
    sd = b["spec_decode"]
    assert sd["acceptance_rate"] == pytest.approx(180 / 300)
    assert sd["mean_acceptance_length"] == pytest.approx(1 + 180 / 100)
    assert sd["per_position"] == pytest.approx([0.8, 0.6, 0.4])


def test_vllm_prefix_rate_stays_lookups_without_requeries() -> None:
    b = block("vllm", pages.VLLM_A, pages.VLLM_B, pages.VLLM_C)
    assert "hit_rate_from" not in b["prefix_cache"] and "kv_cache_memory_bytes" not in b
