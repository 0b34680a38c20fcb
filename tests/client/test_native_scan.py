"""The native scan of a finished stream (harness/client/_native.c `scan`) against the Python loop
(harness.client.sse._scan): every record field the same, or the same error.

Streams: the recorded engine reads, then random streams of events built from clean and odd
pieces (reasoning fields, null and missing content, usage on some events, bad usage counts, error
events, non-object events, broken JSON, empty payloads, [DONE] in the middle). The native scan
must either agree exactly or hand the stream back to the Python loop."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest

from harness.client import http_stream, sse
from harness.client.adapters.base import get_adapter
from harness.client.http_stream import ResponseParser
from harness.client.sse import SSEError, interpret
from harness.metrics.record import RequestRecord
from harness.workload.builtin_tokenizer import BuiltinTokenizer

native = pytest.importorskip("harness.client._native", reason="the native reader was not built here (no compiler)")

CHAT = get_adapter("openai-chat")
COMPL = get_adapter("openai-completions")
count = BuiltinTokenizer().count
DATA = Path(__file__).parent / "data" / "sim_stream_segments.json"
FIELDS = [f for f in RequestRecord.__dataclass_fields__ if f != "_derived"]


def record(lines, adapter, reader: str, monkeypatch) -> tuple:
    monkeypatch.setattr(http_stream, "READER", reader)
    rec = RequestRecord(index=0, class_name="c", sent_ns=1_000)
    try:
        interpret(rec, lines, adapter, count)
    except SSEError as exc:
        return ("error", exc.kind, exc.detail)
    return ("ok", *[getattr(rec, f) for f in FIELDS])


def agree(lines, adapter, monkeypatch) -> tuple:
    py = record(lines, adapter, "python", monkeypatch)
    nat = record(lines, adapter, "native", monkeypatch)
    assert nat == py, lines
    return py


def test_recorded_engine_streams(monkeypatch) -> None:
    doc = json.loads(DATA.read_text())
    for r in doc["responses"]:
        p = ResponseParser()
        for d, stamp in r["segments"]:
            p.feed(base64.b64decode(d), stamp)
        out = agree(p.res.lines, CHAT, monkeypatch)
        assert out[0] == "ok" and out[1 + FIELDS.index("error_kind")] is None
        assert native.scan(p.res.lines, native.KIND_CHAT, sse._loads) is not None  # clean: scanned natively


def _piece(rnd: random.Random, chat: bool) -> bytes:
    """One SSE line: mostly clean events, sometimes odd ones."""
    roll = rnd.random()
    text = rnd.choice(["", " a", "b c", "\u00e9\u4e2d", None])
    if roll < 0.03:
        return rnd.choice(
            [
                b"data: [DONE]",
                b"data:",
                b"data:   ",
                b"data: {broken",
                b"data: 5",
                b"data: []",
                b'data: {"error":{"message":"boom"}}',
                b'data: {"error":"x","choices":[{"delta":{}}]}',
                b'data: {"a":1},{"b":2}',
                b'data: "str"',
                b"da",
            ]
        )
    body: dict = {"id": "x"}
    if roll < 0.06:
        body["choices"] = rnd.choice(
            [
                [],
                {},
                "x",
                [5],
                [[]],
                None,
                [{"delta": 5}],
                [{"delta": []}],
                [{"delta": {"content": 5}}],
                [{"text": 7}],
                [{"delta": {"reasoning": 1}}],
            ]
        )
    elif chat:
        delta: dict = {}
        if text is not None:
            delta["content"] = text
        if rnd.random() < 0.15:
            delta[rnd.choice(["reasoning_content", "reasoning"])] = rnd.choice(["", "think ", None])
        if rnd.random() < 0.1:
            delta["role"] = "assistant"
        body["choices"] = [
            {
                "index": 0,
                "delta": delta if rnd.random() > 0.05 else None,
                "finish_reason": rnd.choice([None, None, None, "stop"]),
            }
        ]
    else:
        body["choices"] = [{"index": 0, "text": text, "finish_reason": rnd.choice([None, None, "length"])}]
    if rnd.random() < 0.2:
        usage: dict = {"prompt_tokens": rnd.randint(0, 9), "completion_tokens": rnd.randint(0, 30)}
        if rnd.random() < 0.05:
            usage[rnd.choice(["prompt_tokens", "completion_tokens", "total_tokens"])] = rnd.choice(
                [-1, True, 1.5, "3", None, 10**30]
            )
        if rnd.random() < 0.1:
            usage["prompt_tokens_details"] = rnd.choice(
                [None, {}, {"cached_tokens": 3}, {"cached_tokens": "x"}, {"cached_tokens": False}, [], 4]
            )
        body["usage"] = rnd.choice([usage, usage, usage, {}, None, [], "u"]) if rnd.random() < 0.1 else usage
    sep = rnd.choice([b"data: ", b"data:", b"data:  ", b"data:\t"])
    return sep + json.dumps(body, ensure_ascii=rnd.random() < 0.5).encode() + rnd.choice([b"", b" ", b"\t"])


@pytest.mark.parametrize("adapter", [CHAT, COMPL], ids=["chat", "completions"])
def test_random_streams_agree(adapter, monkeypatch) -> None:
    rnd = random.Random(adapter.name)
    outcomes = {"ok": 0, "error": 0}
    scanned = 0
    for _ in range(1500):
        n = rnd.randint(0, 25)
        lines = [
            (1000 + 10 * i + rnd.choice([0, 0, 0, -10 if i else 0]), _piece(rnd, adapter is CHAT)) for i in range(n)
        ]
        if rnd.random() < 0.7:
            lines.append((1000 + 10 * n, b"data: [DONE]"))
        out = agree(lines, adapter, monkeypatch)
        outcomes[out[0]] += 1
        kind = native.KIND_CHAT if adapter is CHAT else native.KIND_COMPLETIONS
        scanned += native.scan(lines, kind, sse._loads) is not None
    # both kinds of outcome were exercised, and most clean streams took the native path
    assert outcomes["ok"] > 300 and outcomes["error"] > 100, outcomes
    assert scanned > 300


def test_not_what_a_reader_makes_goes_to_python(monkeypatch) -> None:
    assert native.scan([(1, "data: x")], native.KIND_CHAT, sse._loads) is None
    assert native.scan([[1, b"data: {}"]], native.KIND_CHAT, sse._loads) is None
    agree([(5, b'data: {"choices":[{"delta":{"content":"x"}}]}'), (6, b"data: [DONE]")], CHAT, monkeypatch)


def _templated(rnd: random.Random, chat: bool) -> list[tuple[int, bytes]]:
    """One engine's stream: every content event the same object but for its text (the native
    scan's skeleton path), texts with escapes, quotes, backslashes and non-ASCII, and now and then
    an event that breaks the pattern (raw bytes that are not a JSON string, another shape)."""
    head = b'data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    texts = [
        "a",
        " b",
        "",
        "\u00e9t\u00e9",
        "\u4e2d\u6587",
        'say "hi"',
        "back\\slash",
        "tab\there",
        "nl\n",
        "\U0001f600",
        '","content":"x',
        "\\",
        "\u2028",
        " \\u0041",
    ]
    raw_middles = [
        b"\\u00e9",
        b'\\"',
        b"\\ud83d\\ude00",
        b"\\ud800",
        b"bad\\q",
        b"ctl\x01",
        b"\xff\xfe",
        b"lone\\",
        b'x"y',
        b"\\/",
        b"\xed\xa0\x80",
    ]
    lines = [(0, head + b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}')]
    for i in range(rnd.randint(1, 30)):
        stamp = 10 * (i + 1) - rnd.choice([0, 0, 0, 10])
        if rnd.random() < 0.08:  # raw bytes where the text goes: valid escapes, and ones JSON forbids
            mid = rnd.choice(raw_middles)
        else:
            mid = json.dumps(rnd.choice(texts) * rnd.randint(1, 3), ensure_ascii=rnd.random() < 0.3)[1:-1].encode()
        if chat:
            body = head + b'"delta":{"content":"' + mid + b'"},"logprobs":null,"finish_reason":null}]}'
        else:
            body = (
                head.replace(b"chat.completion.chunk", b"text_completion")
                + b'"text":"'
                + mid
                + b'","logprobs":null,"finish_reason":null}]}'
            )
        if rnd.random() < 0.05:  # the pattern broken: another shape, reasoning, usage, an error
            body = rnd.choice(
                [
                    body.replace(b'"finish_reason":null', b'"finish_reason":"stop"'),
                    body.replace(b'"delta":{', b'"delta":{"reasoning_content":"r",') if chat else body,
                    body[:-1] + b',"usage":{"prompt_tokens":3,"completion_tokens":' + str(i).encode() + b"}}",
                    b'data: {"error":{"message":"overloaded"}}',
                    body + b" ",
                ]
            )
        lines.append((stamp, body))
    lines.append((999, b'data: {"id":"chatcmpl-7","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}'))
    if rnd.random() < 0.8:
        lines.append((1000, b"data: [DONE]"))
    return lines


@pytest.mark.parametrize("adapter", [CHAT, COMPL], ids=["chat", "completions"])
def test_engine_like_streams_through_the_skeleton_agree(adapter, monkeypatch) -> None:
    rnd = random.Random("skeleton" + adapter.name)
    outcomes = {"ok": 0, "error": 0}
    scanned = 0
    kind = native.KIND_CHAT if adapter is CHAT else native.KIND_COMPLETIONS
    for _ in range(1500):
        lines = _templated(rnd, adapter is CHAT)
        out = agree(lines, adapter, monkeypatch)
        outcomes[out[0]] += 1
        scanned += native.scan(lines, kind, sse._loads) is not None
    assert outcomes["ok"] > 500 and outcomes["error"] > 50, outcomes
    assert scanned > 500  # taken natively, not handed back
