"""harness.engines.parts.flags: how a knob's value becomes an engine's flags and is read back, a
switch's sense, environment-variable knobs, and the check that a tune file uses the kind's names."""

from __future__ import annotations

import pytest

from harness.engines import get_kind, kind_names
from harness.engines.parts.flags import GUIDE_KNOBS, FlagMap, Knob, flag_key

from . import options


def test_flag_key_keeps_environment_variable_names() -> None:
    assert flag_key("--max_num_seqs") == "max-num-seqs"
    assert flag_key("env:PREFIX_CACHING") == "env:PREFIX_CACHING"  # the process reads it as written


def test_a_plain_knob_is_one_flag() -> None:
    k = Knob("max-running-requests")
    assert k.change(64) == {"max-running-requests": 64} and k.change(None) == {"max-running-requests": None}
    assert k.value({"max_running_requests": 64}) == 64 and k.value({}) is None


def test_a_copied_knob_sets_every_flag_and_reads_one_value() -> None:
    kv = get_kind("llamacpp").flags.knob("kv-cache-dtype")
    assert kv.change("q8_0") == {"cache-type-k": "q8_0", "cache-type-v": "q8_0"}
    assert kv.value({"cache-type-k": "q8_0", "cache-type-v": "q8_0"}) == "q8_0"
    assert kv.value({}) is None
    # K and V apart: the mapping, so a candidate q8_0 is not mistaken for what runs
    assert kv.value({"cache-type-k": "q8_0", "cache-type-v": "f16"}) == {"cache-type-k": "q8_0", "cache-type-v": "f16"}
    assert kv.change({"cache-type-k": "q4_0", "cache-type-v": "q8_0"}) == {
        "cache-type-k": "q4_0",
        "cache-type-v": "q8_0",
    }


def test_a_group_knob_takes_a_scalar_or_a_mapping_and_clears_what_it_set() -> None:
    spec = get_kind("sglang").flags.knob("speculative-config")
    assert spec.change("NGRAM") == {"speculative-algorithm": "NGRAM"}
    eagle = {"speculative-algorithm": "EAGLE", "speculative_draft_model_path": "d", "speculative-num-steps": 3}
    flags = spec.change(eagle)
    assert flags == {"speculative-algorithm": "EAGLE", "speculative-draft-model-path": "d", "speculative-num-steps": 3}
    assert spec.value(flags) == flags and spec.value({"speculative-algorithm": "NGRAM"}) == "NGRAM"
    # back to NGRAM or off: the draft flags the current set holds are removed (None), nothing else is named
    assert spec.change("NGRAM", flags) == {
        "speculative-algorithm": "NGRAM",
        "speculative-draft-model-path": None,
        "speculative-num-steps": None,
    }
    assert spec.change(None, {"speculative-algorithm": "NGRAM"}) == {"speculative-algorithm": None}
    with pytest.raises(ValueError, match="speculative-config: not one of"):
        spec.change({"speculative-config": "{}"})


@pytest.mark.parametrize(
    ("kind", "guide", "on", "off"),
    [
        ("vllm", "enable-prefix-caching", True, False),
        ("vllm", "cuda-graphs", None, True),  # --enforce-eager
        ("sglang", "enable-prefix-caching", None, True),  # --disable-radix-cache
        ("sglang", "enable-chunked-prefill", 512, -1),  # the budget is the switch
        ("tgi", "enable-prefix-caching", "1", "0"),  # env PREFIX_CACHING
        ("tgi", "cuda-graphs", [1, 2, 4], 0),
        ("llamacpp", "enable-prefix-caching", True, False),  # --cache-prompt / --no-cache-prompt
        ("llamacpp", "cuda-graphs", None, "1"),  # env GGML_CUDA_DISABLE_GRAPHS
    ],
)
def test_a_switch_reads_its_engines_sense(kind: str, guide: str, on: object, off: object) -> None:
    k = get_kind(kind).flags.knob(guide)
    assert k.is_on(on) is True and k.is_on(off) is False
    assert k.is_on(None) is k.default_on is True  # every one of these is on by default


def test_a_switch_left_to_the_engine_is_undecided() -> None:
    graphs = get_kind("transformers").flags.knob("cuda-graphs")
    assert graphs.is_on(None) is None and graphs.is_on(True) is True and graphs.is_on(False) is False


def test_misspelt_names_a_guide_name_the_kind_spells_otherwise_or_lacks() -> None:
    sglang, tgi = get_kind("sglang").flags, get_kind("tgi").flags
    assert (
        sglang.misspelt("max_num_seqs") == "engine kind sglang spells --max-num-seqs as --max-running-requests; "
        "write max-running-requests"
    )
    assert tgi.misspelt("enable-prefix-caching") == (
        "engine kind tgi spells --enable-prefix-caching as env PREFIX_CACHING "
        "(on: env PREFIX_CACHING=1; off: env PREFIX_CACHING=0 (default on)); write env:PREFIX_CACHING"
    )
    assert sglang.misspelt("enable-prefix-caching") == (  # a switch of the other sense says so
        "engine kind sglang spells --enable-prefix-caching as --disable-radix-cache "
        "(on: without --disable-radix-cache; off: --disable-radix-cache (default on)); write disable-radix-cache"
    )
    assert tgi.misspelt("max-num-seqs").startswith("engine kind tgi has no equivalent of --max-num-seqs: TGI admits")
    # its own names, names the guides do not use, and names it shares with the guides pass
    for name in ("max-running-requests", "kv-cache-dtype", "enable-metrics", "attention-backend"):
        assert sglang.misspelt(name) is None, name
    assert all(get_kind("vllm").flags.misspelt(g) is None for g in GUIDE_KNOBS if g != "cuda-graphs")


@pytest.mark.parametrize("name", kind_names())
def test_every_knob_is_consistent(name: str) -> None:
    fm: FlagMap = get_kind(name).flags
    for guide, k in fm.knobs.items():
        assert guide in GUIDE_KNOBS
        if k.flag is None:
            assert k.why_missing and not k.also and not k.try_values, guide
            continue
        assert not k.why_missing, guide
        assert all(flag_key(f) == f for f in k.flags), f"{name} {guide}: write flags as their canonical keys"
        assert fm.knob_of(k.flag).flag == k.flag
        assert k.value(k.change("x")) == "x", guide  # what a value writes reads back as that value


@pytest.mark.parametrize("name", sorted(options.RECORDED))
def test_every_setting_tune_starts_is_taken_by_the_engines_release(name: str) -> None:
    """Each knob the kind has, set through its map as tune and sweep set it (both settings of a
    switch, the FP8 spelling, a speculative candidate in the kind's form), is an option of the
    release the map was read from (tests/engines/data/<kind>/), with a value exactly when it takes one."""
    covered = {guide for guide, _ in options.every_setting(name)}
    assert covered == {g for g, k in get_kind(name).flags.knobs.items() if k.flag is not None}
    assert options.refused_settings(name) == []


def test_every_flag_map_is_checked_against_a_release() -> None:
    """A kind that writes a map of its own adds its release's option listing to options.RECORDED
    (kinds on vLLM's map are checked with vllm; custom and external run the user's command)."""
    maps = {get_kind(n).flags.kind for n in kind_names()}
    assert maps <= set(options.RECORDED), sorted(maps - set(options.RECORDED))


def test_the_option_check_refuses_another_engines_names() -> None:
    # what the maps replace: vLLM's names on SGLang's and llama-server's command lines
    assert options.problems(options.argv_for("vllm", {"max-num-seqs": 8}), options.sglang(), 3) == [
        "--max-num-seqs: not an option of this release",
        "'8': a value with no option before it",
    ]
    assert options.problems(["llama-server", "--enforce-eager", "--cache-prompt=1"], options.llamacpp()) == [
        "--enforce-eager: not an option of this release",
        "--cache-prompt: a switch given a value",
    ]
    assert options.problems(["text-generation-launcher", "--num-shard"], options.tgi()) == [
        "--num-shard: needs a value"
    ]


@pytest.mark.parametrize(
    ("name", "choices"),
    [
        # the FP8 (or, for llama.cpp, 8-bit) KV-cache type each release lists as a choice
        ("vllm", "auto bfloat16 float16 fp8 fp8_ds_mla fp8_e4m3 fp8_e5m2"),  # vLLM 0.32.0 --kv-cache-dtype
        ("sglang", "auto fp8_e5m2 fp8_e4m3 mxfp8 bf16 bfloat16 nvfp4 fp4_mx_block16"),  # 0.5.23
        ("tgi", "fp8_e4m3fn fp8_e5m2"),  # v3.3.7 enum KVCacheDtype
        ("llamacpp", "f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1"),  # --cache-type-k/-v allowed values
    ],
)
def test_the_kv_dtype_tried_is_a_choice_of_the_release(name: str, choices: str) -> None:
    knob = get_kind(name).flags.knob("kv-cache-dtype")
    assert knob.try_values and set(knob.try_values) <= set(choices.split())


def test_an_environment_switch_reads_its_value_as_text() -> None:
    graphs = get_kind("llamacpp").flags.knob("cuda-graphs")  # GGML_CUDA_DISABLE_GRAPHS set (to anything) is off
    assert graphs.is_on("1") is False and graphs.is_on(1) is False and graphs.is_on(True) is False
    assert graphs.is_on(None) is True and graphs.is_on("0") is False  # ggml only asks getenv() != NULL
    cache = get_kind("tgi").flags.knob("enable-prefix-caching")  # PREFIX_CACHING
    assert cache.is_on(0) is False and cache.is_on(False) is False and cache.is_on("1") is True
