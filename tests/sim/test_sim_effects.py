"""The tuning guides' effects, each shown over real HTTP with the right sign (A vs B, wide margins)."""

from __future__ import annotations

import asyncio
import random
import statistics
import urllib.request

import aiohttp
import pytest
from sim_client import chat_body, p99, run, stream, words
from simlag import raw_sim_lag, retry_while_lagging
from waiting import wait_until

# -- chunked prefill -------------------------------------------------------------------------

CHUNK_FLAGS = ("--sim-speed", "1", "--max-model-len", "8192", "--num-gpu-blocks-override", "4000")


def _running(url: str) -> float:
    """vllm:num_requests_running from the simulator's /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in r.read().decode().splitlines()
            if line.startswith("vllm:num_requests_running")
        )


async def _decodes_with_long_prompts(url: str) -> list[float]:
    """4 decoding streams; meanwhile 3 long (6,000-token, uncached) prompts arrive. Returns decode ITLs."""
    rng = random.Random(7)
    async with aiohttp.ClientSession() as s:
        decodes = [asyncio.create_task(stream(s, url, chat_body(words(20, rng), 120))) for _ in range(4)]
        await asyncio.to_thread(wait_until, lambda: _running(url) >= 4, "the 4 decodes running")
        for _ in range(3):
            await stream(s, url, chat_body(words(6000, rng), 1))
            await asyncio.sleep(0.05)  # the workload's shape: a few decode steps between two long prompts
        results = await asyncio.gather(*decodes)
    itls: list[float] = []
    for r in results:
        assert r.done
        itls += r.itls_s()
    return itls


def test_chunked_prefill_lowers_p99_itl(sim):
    srvs: list = []

    def attempt() -> None:  # fresh simulators each time: their lag counters start at 0
        srvs[:] = [
            sim(*CHUNK_FLAGS, "--enable-chunked-prefill", "--max-num-batched-tokens", "512"),
            sim(*CHUNK_FLAGS, "--no-enable-chunked-prefill"),
        ]
        p99_chunked = p99(run(_decodes_with_long_prompts(srvs[0].url)))
        p99_whole = p99(run(_decodes_with_long_prompts(srvs[1].url)))
        # a whole 6k-token prefill is one ~165 ms step that stalls every decode; 512-token chunks
        # keep steps under ~20 ms
        assert p99_whole > 0.1
        assert p99_chunked < 0.5 * p99_whole, (p99_chunked, p99_whole)

    retry_while_lagging(attempt, lambda: next((w for w in (raw_sim_lag(s.metrics()) for s in srvs) if w), None))


# -- prefix caching --------------------------------------------------------------------------

PREFIX_FLAGS = ("--sim-speed", "2", "--max-model-len", "4096", "--num-gpu-blocks-override", "2000")


async def _shared_prefix_ttfts(url: str, n: int = 8) -> list[float]:
    rng = random.Random(11)
    prefix = words(2048, rng)
    ttfts = []
    async with aiohttp.ClientSession() as s:
        for _ in range(n):
            r = await stream(s, url, chat_body(prefix + " " + words(32, rng), 2))
            ttfts.append(r.ttft_s())
    return ttfts[1:]  # the first request fills the cache


@pytest.fixture(scope="module")
def cache_on(sim):
    srv = sim(*PREFIX_FLAGS)
    srv.ttfts = run(_shared_prefix_ttfts(srv.url))
    return srv


@pytest.fixture(scope="module")
def cache_off(sim):
    srv = sim(*PREFIX_FLAGS, "--no-enable-prefix-caching")
    srv.ttfts = run(_shared_prefix_ttfts(srv.url))
    return srv


def test_prefix_caching_raises_hit_rate(cache_on):
    m = cache_on.metrics()
    rate = m["vllm:prefix_cache_hits_total"] / m["vllm:prefix_cache_queries_total"]
    assert rate > 0.7, rate  # 7 of 8 requests reuse 2,048 of their 2,080 tokens


def test_prefix_caching_lowers_ttft(cache_on, cache_off):
    def attempt() -> None:
        on, off = statistics.median(cache_on.ttfts), statistics.median(cache_off.ttfts)
        assert on < 0.5 * off, (on, off)

    def lagged() -> str | None:  # measured again when either simulator fell behind (TTFT is its step time)
        why = raw_sim_lag(cache_on.metrics()) or raw_sim_lag(cache_off.metrics())
        if why:
            for srv in (cache_on, cache_off):
                srv.ttfts = run(_shared_prefix_ttfts(srv.url))
        return why

    retry_while_lagging(attempt, lagged)


def test_no_enable_prefix_caching_turns_it_off(cache_off):
    m = cache_off.metrics()
    assert m["vllm:prefix_cache_hits_total"] == 0
    info = next(k for k in m if k.startswith("vllm:cache_config_info{"))
    assert 'enable_prefix_caching="False"' in info


# -- KV pressure and preemption --------------------------------------------------------------

KV_FLAGS = ("--sim-speed", "20", "--max-model-len", "512", "--num-gpu-blocks-override", "64", "--block-size", "16")


async def _kv_pressure(srv) -> tuple[float, float]:
    """16 concurrent requests of 100 + 120 tokens (14 blocks each) on a 64-block cache."""
    rng = random.Random(5)
    peak = 0.0

    async with aiohttp.ClientSession() as s:

        async def sample():
            nonlocal peak
            while True:
                async with s.get(srv.url + "/metrics") as resp:
                    for line in (await resp.text()).splitlines():
                        if line.startswith("vllm:kv_cache_usage_perc{"):
                            peak = max(peak, float(line.rsplit(" ", 1)[1]))
                await asyncio.sleep(0.01)

        sampler = asyncio.create_task(sample())
        results = await asyncio.gather(*[stream(s, srv.url, chat_body(words(100, rng), 120)) for _ in range(16)])
        sampler.cancel()
    assert all(r.done and len(r.token_times()) == 120 for r in results)
    return srv.metrics()["vllm:num_preemptions_total"], peak


def test_small_kv_cache_causes_preemptions_and_full_usage(sim):
    preemptions, peak = run(_kv_pressure(sim(*KV_FLAGS, "--max-num-seqs", "16")))
    assert preemptions > 0
    assert peak > 0.9


def test_lower_max_num_seqs_removes_preemptions(sim):
    preemptions, _ = run(_kv_pressure(sim(*KV_FLAGS, "--max-num-seqs", "4")))  # 4 x 14 blocks fit in 64
    assert preemptions == 0


# -- KV dtype ---------------------------------------------------------------------------------


def _cache_info(srv) -> dict[str, str]:
    key = next(k for k in srv.metrics() if k.startswith("vllm:cache_config_info{"))
    body = key[key.index("{") + 1 : -1]
    return dict((kv.split("=", 1)[0], kv.split("=", 1)[1].strip('"')) for kv in body.split('",') if "=" in kv)


def test_fp8_kv_cache_doubles_token_capacity(sim):
    bf16 = int(_cache_info(sim("--max-model-len", "8192"))["kv_cache_size_tokens"])
    fp8 = int(_cache_info(sim("--max-model-len", "8192", "--kv-cache-dtype", "fp8"))["kv_cache_size_tokens"])
    assert 1.99 < fp8 / bf16 < 2.01, (fp8, bf16)


# -- speculative decoding ---------------------------------------------------------------------


def test_speculative_decoding_emits_multi_token_chunks_and_counts_drafts(sim):
    srv = sim(
        "--sim-speed",
        "20",
        "--max-model-len",
        "2048",
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":3,"acceptance_rate":0.8}',
    )

    async def go():
        async with aiohttp.ClientSession() as s:
            return await stream(s, srv.url, chat_body("a b c", 120))

    r = run(go())
    sizes = [n for _, n in r.token_times()]
    assert sum(sizes) == 120 and max(sizes) > 1
    m = srv.metrics()
    assert m["vllm:spec_decode_num_drafts_total"] > 0
    assert 0 < m["vllm:spec_decode_num_accepted_tokens_total"] <= m["vllm:spec_decode_num_draft_tokens_total"]
    assert m["vllm:spec_decode_num_accepted_tokens_per_pos_total"] == m["vllm:spec_decode_num_accepted_tokens_total"]
