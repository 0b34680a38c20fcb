"""When the max-num-seqs step may raise the limit: only when the running count reached the limit
in force. An unset flag is not "no limit": vLLM 0.26 defaults to 128 or more sequences (fewer
only under an explicit, smaller token budget), so 13 running of 32 users while 18 wait is a KV
or token-budget queue (the H200 tune's baseline) that a higher max-num-seqs cannot drain."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from harness.engines.llamacpp import LLAMACPP_FLAGS
from harness.engines.vllm import VLLM_FLAGS
from harness.tune.steps.max_num_seqs import MaxNumSeqs


def ctx(current: dict[str, Any], users: int | None = 32, flags: Any = VLLM_FLAGS) -> SimpleNamespace:
    return SimpleNamespace(
        tune=SimpleNamespace(load=SimpleNamespace(concurrency=users)), current=current, knob=flags.knob
    )


def test_an_unset_flag_binds_only_at_the_engines_default_limit() -> None:
    assert MaxNumSeqs._limit(None, ctx({})) == 128
    assert not MaxNumSeqs._limit_binds(13, 32, None, ctx({}))
    assert "below the engine's default limit, 128 or more" in MaxNumSeqs._below(13, 32, None, ctx({}))


def test_a_token_budget_below_the_default_caps_the_limit_like_vllm() -> None:
    small = ctx({"max-num-batched-tokens": 4})
    assert MaxNumSeqs._limit(None, small) == 4
    assert MaxNumSeqs._limit_binds(7, 8, None, small)
    assert not MaxNumSeqs._limit_binds(7, 8, None, ctx({"max-num-batched-tokens": 512}))


def test_a_set_flag_is_the_limit_and_every_user_running_never_binds() -> None:
    assert MaxNumSeqs._limit_binds(8, 32, 8, ctx({"max-num-seqs": 8}))
    assert not MaxNumSeqs._limit_binds(7, 32, 8, ctx({"max-num-seqs": 8}))
    assert not MaxNumSeqs._limit_binds(32, 32, 64, ctx({"max-num-seqs": 64}))
    assert MaxNumSeqs._below(7, 32, 8, ctx({"max-num-seqs": 8})) == "below the limit 8"


def test_a_kind_whose_default_is_computed_at_start_leaves_the_check_to_the_running_count() -> None:
    # llama.cpp's --parallel -1 means "auto": no limit the harness knows, so a waiting queue may be the slots
    lc = ctx({}, flags=LLAMACPP_FLAGS)
    assert MaxNumSeqs._limit(None, lc) is None
    assert MaxNumSeqs._limit_binds(4, 8, None, lc)
