"""The scheduler's admission gate and the API server's delay (harness/sim/engine.py), driven step by
step without a clock: vLLM's --scheduler-reserve-full-isl (`--sim-admit-full-prompt`, on in the
h200-llama8b-vllm026 profile) and the per-running-sequence front-end delay fitted to the H200."""

from __future__ import annotations

import asyncio
import functools
import random
from time import perf_counter

import pytest

from harness.sim.cli import build_parser, parse
from harness.sim.config import SimConfig
from harness.sim.engine import Engine
from harness.sim.memory import plan_memory
from harness.sim.metrics import Stats
from harness.sim.request import SimRequest

# 64 blocks of 16 tokens (1,024 tokens); 128-token chunks
SMALL = (
    "--num-gpu-blocks-override",
    "64",
    "--block-size",
    "16",
    "--max-model-len",
    "1024",
    "--max-num-batched-tokens",
    "128",
    "--no-enable-prefix-caching",
)


def in_loop(test):
    """SimRequest makes its future on the running loop: run the (clock-free) test inside one."""

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        async def body():
            return test(*args, **kwargs)

        return asyncio.run(body())

    return wrapper


def engine(*flags: str) -> Engine:
    cfg = SimConfig.from_args(parse(build_parser(), list(flags)))  # a --profile's values as defaults
    plan = plan_memory(cfg)
    return Engine(cfg, plan, Stats(plan.max_model_len, 0), random.Random(0))


def request(i: int, prompt: int, out: int) -> SimRequest:
    return SimRequest(
        rid=f"r{i}",
        response_id=f"c{i}",
        chat=False,
        created=0,
        prompt_words=[f"w{i}x{j}" for j in range(prompt)],
        max_tokens=out,
        min_tokens=0,
        ignore_eos=True,
        arrival=perf_counter(),
        arrival_ns=0,
        arrival_wall_ns=0,
        transport=None,
        trace=None,
    )


def drain(e: Engine, reqs: list[SimRequest]) -> int:
    """Run steps until every request finished; returns the preemptions."""
    for r in reqs:
        e._admit(r)
    for _ in range(10_000):
        if not e.running and not e.waiting:
            break
        items, *_ = e._schedule()
        e._apply(items)
    assert not e.running and not e.waiting
    assert all(len(r.out_ids) == r.max_tokens for r in reqs)
    return e.stats.num_preemptions


@in_loop
def test_whole_prompt_gate_waits_where_the_first_chunk_would_be_admitted():
    """A 400-token prompt needs 25 blocks; after a running 640-token prompt took 40, 24 are free:
    its first 128-token chunk (8 blocks) fits, the whole prompt does not. The gate keeps it waiting,
    the chunk rule admits it."""
    for gated, admitted in ((False, 2), (True, 1)):
        e = engine(*SMALL, "--sim-admit-full-prompt" if gated else "--no-sim-admit-full-prompt")
        first = request(0, 640, 10)  # its prompt: 40 blocks
        e._admit(first)
        while first.num_computed < 640:
            e._apply(e._schedule()[0])
        assert e.pool.num_free == 24
        e._admit(request(1, 400, 10))
        e._apply(e._schedule()[0])
        assert len(e.running) == admitted, (gated, len(e.running))


@in_loop
def test_whole_prompt_gate_ends_the_preemptions_of_long_prompts():
    """Three 400 + 200-token requests (38 blocks each) on 64 blocks: admitted on their first chunk,
    they prefill part way and preempt each other as they grow; gated on the whole prompt, fewer start
    at once and fewer are preempted."""
    loose = drain(engine(*SMALL), [request(i, 400, 200) for i in range(3)])
    gated = drain(engine(*SMALL, "--sim-admit-full-prompt"), [request(i, 400, 200) for i in range(3)])
    assert loose > 0
    assert gated < loose, (gated, loose)


@in_loop
def test_api_server_delay_grows_with_the_running_sequences():
    e = engine("--sim-request-overhead-ms", "8", "--sim-frontend-seq-us", "500", "--sim-speed", "2")
    assert e.admission_delay_s() == pytest.approx(4e-3)  # speed 2: half of 8 ms
    e.running = [request(i, 10, 10) for i in range(10)]
    assert e.admission_delay_s() == pytest.approx((8e-3 + 10 * 500e-6) / 2)
    assert engine().admission_delay_s() == 0.0  # the default simulator: no API-server delay


def test_the_h200_profile_turns_both_on():
    e = engine("--profile", "h200-llama8b-vllm026")
    assert e.cfg.admit_full_prompt is True and e.cfg.frontend_seq_s == pytest.approx(548.3e-6)
    assert engine().cfg.admit_full_prompt is False and engine().cfg.frontend_seq_s == 0.0
