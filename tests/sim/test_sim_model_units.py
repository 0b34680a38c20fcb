"""In-process checks of the simulator's models: block pool, KV sizing, cost model, flag parsing."""

from __future__ import annotations

import pytest

from harness.sim.cli import build_parser
from harness.sim.config import ConfigError, SimConfig, parse_human_int, parse_max_model_len
from harness.sim.costmodel import CostModel
from harness.sim.kv_cache import BlockPool, block_hash
from harness.sim.memory import StartupError, plan_memory


def cfg(*flags: str) -> SimConfig:
    return SimConfig.from_args(build_parser().parse_args(list(flags)))


# -- block pool ------------------------------------------------------------------------------


def _chain(tokens: list[str], bs: int = 4) -> list[int]:
    out, parent = [], None
    for i in range(len(tokens) // bs):
        parent = block_hash(parent, tuple(tokens[i * bs : (i + 1) * bs]))
        out.append(parent)
    return out


def test_block_hashes_chain_the_prefix():
    a = _chain(list("abcdefgh"))
    b = _chain(list("abcdefgh"))
    c = _chain(list("xbcdefgh"))  # first block differs
    assert a == b
    assert a[1] != c[1]  # same second-block tokens, different parent


def test_freed_cached_blocks_are_hit_then_evicted_lru_tail_first():
    pool = BlockPool(num_blocks=4, block_size=4, enable_caching=True)
    hashes = _chain(list("abcdefgh"))
    blocks = pool.allocate(2)
    for b, h in zip(blocks, hashes, strict=False):  # 2 blocks, the chain's first 2 hashes
        pool.cache_block(b, h)
    pool.release(blocks)
    assert pool.usage() == 0.0  # cached but free blocks count as free, as in vLLM
    assert pool.lookup(hashes, 2) == blocks
    pool.allocate(2)  # the two never-used blocks
    pool.allocate(1)  # evicts one cached block: the prefix's tail goes first
    assert pool.lookup(hashes, 2) == blocks[:1]
    pool.allocate(1)
    assert pool.lookup(hashes, 2) == []


def test_touching_a_hit_takes_it_off_the_free_queue():
    pool = BlockPool(num_blocks=2, block_size=4, enable_caching=True)
    h = _chain(list("abcd"))
    (b,) = pool.allocate(1)
    pool.cache_block(b, h[0])
    pool.release([b])
    hits = pool.lookup(h, 1)
    assert pool.num_evictable_needed(hits) == 1
    pool.touch(hits)
    assert pool.num_free == 1 and pool.usage() == 0.5


def test_no_caching_means_no_hits_and_reset_clears_free_blocks():
    off = BlockPool(num_blocks=2, block_size=4, enable_caching=False)
    h = _chain(list("abcd"))
    (b,) = off.allocate(1)
    off.cache_block(b, h[0])
    assert off.lookup(h, 1) == []
    on = BlockPool(num_blocks=2, block_size=4, enable_caching=True)
    (b,) = on.allocate(1)
    on.cache_block(b, h[0])
    on.release([b])
    assert on.reset_prefix_cache() and on.lookup(h, 1) == []


# -- KV sizing -------------------------------------------------------------------------------


def test_kv_bytes_per_token_formula_and_default_capacity():
    c = cfg()
    assert c.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # 128 KiB for Llama-3.1-8B in bf16
    plan = plan_memory(c)
    assert 400_000 < plan.kv_cache_size_tokens < 520_000  # ~55-60 GiB of KV on an 80 GiB GPU


def test_fp8_and_tensor_parallel_scale_capacity():
    base = plan_memory(cfg("--max-model-len", "8192")).kv_cache_size_tokens
    fp8 = plan_memory(cfg("--max-model-len", "8192", "--kv-cache-dtype", "fp8")).kv_cache_size_tokens
    tp2 = plan_memory(cfg("--max-model-len", "8192", "-tp", "2")).kv_cache_size_tokens
    assert abs(fp8 / base - 2) < 0.01
    assert tp2 > 2 * base  # heads split in two and half the weights per GPU


def test_explicit_sizes_override_the_fraction():
    assert plan_memory(cfg("--num-gpu-blocks-override", "100", "--max-model-len", "1024")).num_gpu_blocks == 100
    plan = plan_memory(
        cfg("--kv-cache-memory-bytes", "1G", "--max-model-len", "1024", "--gpu-memory-utilization", "0.3")
    )
    assert plan.num_gpu_blocks == (1 << 30) // (131072 * 16)


def test_eager_frees_the_graph_pool_and_util_grows_the_cache():
    base = plan_memory(cfg()).num_gpu_blocks
    assert plan_memory(cfg("--enforce-eager")).num_gpu_blocks > base
    assert plan_memory(cfg("--gpu-memory-utilization", "0.5")).num_gpu_blocks < base


@pytest.mark.parametrize(
    "flags, text",
    [
        (("--sim-gpu-memory-gib", "16"), "No available memory for the cache blocks"),
        (("--gpu-memory-utilization", "1.2"), "must be within (0, 1]"),
        (
            ("--no-enable-chunked-prefill", "--max-num-batched-tokens", "2048", "--max-model-len", "4096"),
            "max_num_batched_tokens (2048) is smaller than max_model_len (4096)",
        ),
    ],
)
def test_startup_errors(flags, text):
    with pytest.raises(StartupError) as err:
        plan_memory(cfg(*flags))
    assert text in err.value.lines[0]
    assert err.value.lines[-1].startswith("RuntimeError: Engine core initialization failed")


# -- cost model ------------------------------------------------------------------------------


def test_cost_model_magnitudes():
    cm = CostModel.from_config(cfg())
    decode1 = cm.step_seconds(0, 1, 500, False)
    decode64 = cm.step_seconds(0, 64, 64 * 1500, False)
    assert 0.008 < decode1 < 0.012 and 0.010 < decode64 < 0.016
    prefill_per_100ms = 3700 * 0.1 / cm.step_seconds(3700, 0, 0, False)
    assert 2500 < prefill_per_100ms < 5000
    assert CostModel.from_config(cfg("--enforce-eager")).step_seconds(0, 1, 500, False) > decode1
    assert CostModel.from_config(cfg("--sim-speed", "2")).step_seconds(0, 1, 500, False) == pytest.approx(decode1 / 2)


def test_speculation_wins_at_batch_1_and_loses_at_batch_64_on_a_compute_poor_gpu():
    """The lesson of the shipped sim_spec_decode_load sweep, from the cost model alone (its end-to-end
    sweep runs with -m slow): per emitted token, ngram k=3 at 60% acceptance (1 + .6 + .36 + .216 =
    2.176 tokens a step) is cheaper at one sequence (memory-bound: the extra tokens ride along) and
    dearer at 64 (compute-bound: 4 tokens verified per sequence for 2.2 kept)."""
    flags = ("--sim-tflops", "150", "--max-model-len", "4096")
    plain = CostModel.from_config(cfg(*flags))
    spec = CostModel.from_config(
        cfg(*flags, "--speculative-config", '{"method":"ngram","num_speculative_tokens":3,"acceptance_rate":0.6}')
    )
    kept = 1 + 0.6 + 0.6**2 + 0.6**3

    def per_token(batch: int) -> float:  # spec / plain seconds per emitted token, 1.5k tokens of context each
        context = batch * 1500
        return (spec.step_seconds(0, batch * 4, context, True) / (batch * kept)) / (
            plain.step_seconds(0, batch, context, False) / batch
        )

    assert per_token(1) < 0.7 and per_token(64) > 1.0, (per_token(1), per_token(64))


# -- flag parsing ----------------------------------------------------------------------------


def test_human_readable_lengths():
    assert parse_human_int("25.6k", "x") == 25600 and parse_human_int("1K", "x") == 1024
    assert parse_max_model_len("auto") is None and parse_max_model_len("-1") is None
    with pytest.raises(ConfigError):
        parse_max_model_len("lots")


def test_scheduler_defaults_follow_gpu_class():
    assert (cfg().max_num_seqs, cfg().max_num_batched_tokens) == (1024, 8192)
    small = cfg("--sim-gpu-memory-gib", "48")
    assert (small.max_num_seqs, small.max_num_batched_tokens) == (256, 2048)


# -- calibrated profiles (harness/sim/profiles.py, bench/sim_fit_h200.py) ----------------------


def test_profile_sets_the_fitted_values_and_flags_beside_it_win():
    from harness.sim.cli import parse

    c = SimConfig.from_args(parse(build_parser(), ["--profile", "h200-llama8b-vllm026", "--sim-tflops", "100"]))
    assert c.gpu_memory_gib == 139.8 and c.hbm_tbps == 3.691 and c.tflops == 100.0  # the flag given wins
    assert c.step_overhead_s == pytest.approx(0.421e-3) and c.seq_overhead_s == pytest.approx(17.71e-6)
    assert c.request_overhead_s == pytest.approx(8.38e-3) and c.graph_gib == 0.98
    assert c.startup.profile_s == 19.27 and c.startup.profile_cached_s == 2.96
    # the H200's KV cache at the default 0.92: vLLM 0.26.0 logged 112.33 GiB = 920,192 tokens
    plan = plan_memory(c)
    assert plan.available_kv_bytes / 2**30 == pytest.approx(112.33, abs=0.01)
    assert abs(plan.num_gpu_blocks * plan.block_size - 920192) <= 64


def test_profile_memory_check_fails_beside_another_process_as_the_h200_did():
    """0.92 of 139.8 GiB with 16 GiB held elsewhere does not start (vLLM: 122.69 GiB free); 0.85
    does, with --kv-cache-memory-bytes set as in the tune (the fraction is checked either way)."""
    from harness.sim.cli import parse

    base = [
        "--profile",
        "h200-llama8b-vllm026",
        "--sim-gpu-memory-used-gib",
        "16",
        "--kv-cache-memory-bytes",
        "2147483648",
    ]
    with pytest.raises(StartupError, match="less than desired GPU memory utilization"):
        plan_memory(SimConfig.from_args(parse(build_parser(), base)))
    plan = plan_memory(SimConfig.from_args(parse(build_parser(), [*base, "--gpu-memory-utilization", "0.85"])))
    assert plan.num_gpu_blocks * plan.block_size == 16384


def test_step_cost_has_a_per_sequence_term():
    c = cfg("--sim-seq-overhead-us", "20", "--sim-step-overhead-ms", "0.5")
    m = CostModel.from_config(c)
    one, many = m.step_seconds(0, 1, 1000, False, 1), m.step_seconds(0, 64, 1000, False, 64)
    # same context read; 63 more sequences cost 63 x 20 us (+ their decode FLOPs, below the memory time)
    assert many - one == pytest.approx(63 * 20e-6, rel=1e-6)
    assert cfg().seq_overhead_s == 0.0 and CostModel.from_config(cfg()).overhead_s == pytest.approx(4e-3)
