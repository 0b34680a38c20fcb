"""interpret(): stamped SSE lines -> chunk times, tokens per chunk, usage, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.client.adapters.base import Prompt, get_adapter
from harness.client.sse import SSEError, interpret
from harness.metrics.record import RequestRecord
from harness.workload.builtin_tokenizer import BuiltinTokenizer

CHAT = get_adapter("openai-chat")
COMPL = get_adapter("openai-completions")
count = BuiltinTokenizer().count
pytestmark = pytest.mark.usefixtures("reader")  # the native scan and the Python loop (tests/conftest.py)


def ev(delta: dict[str, Any] | None = None, usage: dict[str, Any] | None = None, choices: bool = True) -> bytes:
    body: dict[str, Any] = {
        "id": "x",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": None}] if choices else [],
    }
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode()


def text_ev(text: str, usage: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"choices": [{"index": 0, "text": text}]}
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode()


DONE = b"data: [DONE]"


def run(lines: list[tuple[int, bytes]], adapter=CHAT, tok=count) -> RequestRecord:
    rec = RequestRecord(index=0, class_name="c", sent_ns=1_000)
    interpret(rec, lines, adapter, tok)
    return rec


def test_role_only_first_chunk_is_not_ttft() -> None:
    rec = run(
        [
            (2_000, ev({"role": "assistant", "content": ""})),
            (5_000, ev({"content": " a"})),
            (6_000, ev({"content": " b"})),
            (7_000, ev(usage={"prompt_tokens": 4, "completion_tokens": 2}, choices=False)),
            (7_500, DONE),
        ]
    )
    assert rec.role_ns == 2_000
    assert rec.chunk_ns == [5_000, 6_000]
    assert rec.ttft_ns == 4_000 and rec.e2e_ns == 5_000
    assert rec.chunk_tokens == [1, 1]
    assert (rec.input_tokens, rec.output_tokens, rec.output_source) == (4, 2, "usage")
    assert rec.done_ns == 7_500 and rec.error_kind is None and rec.events == 5


def test_role_chunk_without_content_key() -> None:
    rec = run([(2_000, ev({"role": "assistant"})), (3_000, ev({"content": "x"})), (4_000, DONE)])
    assert rec.role_ns == 2_000 and rec.chunk_ns == [3_000]


def test_reasoning_content_counts_as_output() -> None:
    rec = run(
        [
            (2_000, ev({"role": "assistant", "content": ""})),
            (3_000, ev({"reasoning_content": " think"})),
            (4_000, ev({"reasoning": " more"})),
            (5_000, ev({"content": " answer"})),
            (6_000, ev(usage={"prompt_tokens": 1, "completion_tokens": 3}, choices=False)),
            (6_000, DONE),
        ]
    )
    assert rec.chunk_ns == [3_000, 4_000, 5_000] and rec.ttft_ns == 2_000
    assert rec.tokenizer_output_tokens == 3


def test_continuous_usage_gives_tokens_per_chunk() -> None:
    rec = run(
        [
            (2_000, ev({"role": "assistant", "content": ""}, usage={"prompt_tokens": 9, "completion_tokens": 0})),
            (3_000, ev({"content": " a b"}, usage={"prompt_tokens": 9, "completion_tokens": 2})),
            (4_000, ev({"content": " c"}, usage={"prompt_tokens": 9, "completion_tokens": 3})),
            (5_000, ev({"content": " d e f g"}, usage={"prompt_tokens": 9, "completion_tokens": 7})),
            (6_000, ev(usage={"prompt_tokens": 9, "completion_tokens": 7}, choices=False)),
            (6_000, DONE),
        ],
        tok=lambda t: 1,  # a tokenizer that would be wrong: usage must win
    )
    assert rec.chunk_tokens == [2, 1, 4]
    assert (rec.output_tokens, rec.output_source, rec.input_tokens) == (7, "continuous_usage", 9)


def test_usage_equal_to_chunks_means_one_token_each() -> None:
    rec = run(
        [
            (2_000, ev({"content": "several words in one"})),
            (3_000, ev({"content": " x y"})),
            (4_000, ev(usage={"prompt_tokens": 1, "completion_tokens": 2}, choices=False)),
            (4_000, DONE),
        ]
    )
    assert rec.chunk_tokens == [1, 1] and rec.output_tokens == 2 and rec.tokenizer_output_tokens == 6


def test_multi_token_chunks_scaled_to_the_server_total() -> None:
    # the tokenizer sees 3+3+1 = 7 words; the server says 14 tokens: each chunk doubles
    rec = run(
        [
            (2_000, ev({"content": "a b c"})),
            (3_000, ev({"content": " d e f"})),
            (4_000, ev({"content": " g"})),
            (5_000, ev(usage={"prompt_tokens": 1, "completion_tokens": 14}, choices=False)),
            (5_000, DONE),
        ]
    )
    assert rec.chunk_tokens == [6, 6, 2] and sum(rec.chunk_tokens) == 14
    assert rec.output_source == "usage" and rec.tokenizer_output_tokens == 7


def test_scaling_uses_largest_remainder_and_keeps_the_total() -> None:
    # estimates 1,1,1 scaled to 5: 5/3 each -> 1,1,1 + 2 distributed
    rec = run(
        [
            (2_000, ev({"content": "a"})),
            (3_000, ev({"content": " b"})),
            (4_000, ev({"content": " c"})),
            (5_000, ev(usage={"prompt_tokens": 1, "completion_tokens": 5}, choices=False)),
            (5_000, DONE),
        ]
    )
    assert sorted(rec.chunk_tokens) == [1, 2, 2] and sum(rec.chunk_tokens) == 5


def test_no_usage_falls_back_to_the_tokenizer() -> None:
    rec = run([(2_000, ev({"content": "a b"})), (3_000, ev({"content": " c"})), (4_000, DONE)])
    assert rec.chunk_tokens == [2, 1]
    assert (rec.output_tokens, rec.output_source, rec.input_tokens) == (3, "tokenizer", None)


def test_missing_done_is_incomplete() -> None:
    rec = run(
        [(2_000, ev({"content": "a"})), (3_000, ev(usage={"prompt_tokens": 1, "completion_tokens": 1}, choices=False))]
    )
    assert rec.error_kind == "incomplete" and rec.chunk_ns == [2_000] and rec.output_tokens == 1


def test_error_event_is_server_error() -> None:
    with pytest.raises(SSEError) as info:
        run([(2_000, ev({"content": "a"})), (3_000, b'data: {"error": {"message": "engine died", "code": 500}}')])
    assert info.value.kind == "server_error" and "engine died" in info.value.detail


@pytest.mark.parametrize(
    "line",
    [
        b"data: {not json",
        b"data: [1, 2]",
        b'data: "str"',
        # the junk shapes that crashed the load process (audit f79ef64, group 2; run end to end against
        # tests/load/badserver.py by test_badserver_modes, some with -m slow only)
        b'data: {"choices": [{"delta": {"content": " a"}}], "usage": "lots"}',
        b'data: {"choices": [{"delta": {"content": " a"}}], "usage": {"completion_tokens": "one"}}',
        b'data: {"choices": ["x"]}',
        b'data: {"choices": [{"delta": "str"}]}',
        b'data: {"choices": [{"delta": {"content": 5}}]}',
    ],
    ids=["not-json", "array", "string", "usage-str", "usage-tokens-str", "choice-str", "delta-str", "content-int"],
)
def test_malformed_json(line: bytes) -> None:
    with pytest.raises(SSEError) as info:
        run([(2_000, ev({"content": "a"})), (3_000, line), (4_000, DONE)])
    assert info.value.kind == "malformed"


def test_empty_data_lines_and_spacing_are_tolerated() -> None:
    rec = run([(2_000, b"data:"), (3_000, b'data:{"choices":[{"delta":{"content":"a"}}]}'), (4_000, b"data:[DONE]")])
    assert rec.chunk_ns == [3_000] and rec.error_kind is None


def test_same_stamp_chunks_are_counted_as_coalesced() -> None:
    rec = run(
        [
            (2_000, ev({"content": "a"})),
            (2_000, ev({"content": "b"})),
            (2_000, ev({"content": "c"})),
            (3_000, ev({"content": "d"})),
            (3_000, DONE),
        ]
    )
    assert rec.coalesced_reads == 2


def test_cached_tokens_from_prompt_details() -> None:
    rec = run(
        [
            (2_000, ev({"content": "a"})),
            (
                3_000,
                ev(
                    usage={"prompt_tokens": 40, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 32}},
                    choices=False,
                ),
            ),
            (3_000, DONE),
        ]
    )
    assert rec.cached_tokens == 32


def _with(line: bytes, **extra: Any) -> bytes:
    body = json.loads(line[6:])
    body.update(extra)
    return b"data: " + json.dumps(body).encode()


def test_server_timing_from_the_final_usage_chunk() -> None:
    """vLLM 0.32 with --enable-per-request-metrics: `metrics` rides on the final usage chunk."""
    usage = ev(usage={"prompt_tokens": 4, "completion_tokens": 2}, choices=False)
    rec = run(
        [
            (2_000, ev({"content": "a"})),
            (3_000, ev({"content": "b"})),
            (
                4_000,
                _with(
                    usage,
                    metrics={
                        "time_to_first_token_ms": 1.25,
                        "queue_time_ms": 0.5,
                        "generation_time_ms": 3.0,
                        "mean_itl_ms": 3.0,
                    },
                ),
            ),
            (4_000, DONE),
        ]
    )
    assert (rec.server_timing, rec.server_queue_ns, rec.server_prefill_ns, rec.server_decode_ns) == (
        "vllm",
        500_000,
        1_250_000,
        3_000_000,
    )


def test_server_timing_of_llamacpp_and_junk() -> None:
    last = ev({"content": "b"})
    rec = run(
        [
            (2_000, ev({"content": "a"})),
            (3_000, _with(last, timings={"prompt_ms": 2.5, "predicted_ms": 7.0})),
            (4_000, DONE),
        ]
    )
    assert (rec.server_timing, rec.server_queue_ns, rec.server_prefill_ns) == ("llama.cpp", None, 2_500_000)
    # a `metrics` object that is not vLLM's (or no timing at all) leaves the request untimed, never fails it
    for junk in ({"metrics": "fast"}, {"metrics": {"time_to_first_token_ms": "x"}}, {}):
        rec = run(
            [
                (2_000, ev({"content": "a"})),
                (3_000, _with(ev(usage={"completion_tokens": 1}, choices=False), **junk)),
                (4_000, DONE),
            ]
        )
        assert rec.server_timing is None and rec.error_kind is None


def test_completions_adapter() -> None:
    rec = run(
        [
            (2_000, text_ev("")),
            (3_000, text_ev(" a")),
            (4_000, text_ev(" b", {"prompt_tokens": 2, "completion_tokens": 2})),
            (4_000, DONE),
        ],
        adapter=COMPL,
    )
    assert rec.chunk_ns == [3_000, 4_000] and rec.role_ns == 2_000 and rec.output_tokens == 2


def test_adapters_build_streaming_bodies() -> None:
    so = {"include_usage": True, "continuous_usage_stats": True}
    body = CHAT.build_body(Prompt("SYS", "hi", 7), "m", {"temperature": 0.0, "ignore_eos": True}, so)
    assert body["messages"] == [{"role": "system", "content": "SYS"}, {"role": "user", "content": "hi"}]
    assert (body["model"], body["max_tokens"], body["stream"], body["stream_options"], body["ignore_eos"]) == (
        "m",
        7,
        True,
        so,
        True,
    )
    assert CHAT.build_body(Prompt("", "hi", 1), "m", {}, so)["messages"] == [{"role": "user", "content": "hi"}]
    body = COMPL.build_body(Prompt("SYS", "hi", 3), "m", {}, so)
    assert body["prompt"] == "SYS hi" and body["stream"] is True
    assert COMPL.build_body(Prompt("", "hi", 3), "m", {}, so)["prompt"] == "hi"
    assert CHAT.finish_reason({"choices": [{"finish_reason": "length"}]}) == "length"
    assert CHAT.finish_reason({"choices": []}) is None


# ---- odd event shapes from a broken server: counted as malformed, never an exception
# (reliability audit 2026-12-01, High 1: each of these crashed the load process and lost the run)
@pytest.mark.parametrize(
    "event",
    [
        b'data: {"choices": [{"delta": {"content": " a"}}], "usage": "lots"}',
        b'data: {"choices": [{"delta": {"content": " a"}}], "usage": [1, 2]}',
        b'data: {"choices": [{"delta": {"content": " a"}}], "usage": {"completion_tokens": "one"}}',
        b'data: {"choices": [{"delta": {"content": " a"}}], "usage": {"prompt_tokens": 1.5}}',
        b'data: {"choices": [{"delta": {"content": " a"}}], "usage": {"prompt_tokens_details": "x"}}',
        b'data: {"choices": ["x"]}',
        b'data: {"choices": {"0": {}}}',
        b'data: {"choices": [{"delta": "str"}]}',
        b'data: {"choices": [{"delta": {"content": 5}}]}',
        b'data: {"choices": [{"delta": {"content": ["x"]}}]}',
        b'data: {"choices": [{"delta": {"reasoning_content": {"a": 1}}}]}',
    ],
    ids=[
        "usage_str",
        "usage_list",
        "tokens_str",
        "tokens_float",
        "details_str",
        "choice_str",
        "choices_dict",
        "delta_str",
        "content_int",
        "content_list",
        "reasoning_obj",
    ],
)
def test_junk_event_shapes_are_malformed(event: bytes) -> None:
    with pytest.raises(SSEError) as exc:
        run([(1_000, ev({"content": " ok"})), (2_000, event), (3_000, DONE)])
    assert exc.value.kind == "malformed"


def test_junk_completions_text_is_malformed() -> None:
    with pytest.raises(SSEError) as exc:
        run([(1_000, b'data: {"choices": [{"text": 7}]}'), (2_000, DONE)], adapter=COMPL)
    assert exc.value.kind == "malformed"


def test_null_usage_and_null_content_are_fine() -> None:
    rec = run(
        [
            (1_000, b'data: {"choices": [{"delta": {"content": null}}], "usage": null}'),
            (2_000, ev({"content": " a"})),
            (3_000, DONE),
        ]
    )
    assert rec.error_kind is None and rec.chunk_ns == [2_000]
