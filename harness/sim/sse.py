"""OpenAI-compatible SSE events written straight to the transport, one write per event.

Each stream pre-renders the constant parts of its chunk JSON once, so an event costs a few byte
concatenations and one `transport.write`. Events are framed by hand as HTTP/1.1 chunks (the
response was prepared by aiohttp with chunked encoding; aiohttp writes the final `0\\r\\n\\r\\n`
at `write_eof`). Layout matches vLLM:

* chat: a role-only chunk (`delta: {role: assistant, content: ""}`) written right before the first
  token (vLLM emits it together with the first output), then one chunk per engine output (one
  token, or several when speculative decoding accepted several), `finish_reason` on the last one;
* completions: one `text_completion` chunk per output;
* with `stream_options.include_usage` a final `choices: []` chunk with `usage`; with
  `continuous_usage_stats` too, every chunk carries cumulative `usage`;
* then `data: [DONE]`.

When tracing, each write appends (perf_counter_ns after the write, n_tokens, kind code) to an
`array('q')` log.
"""

from __future__ import annotations

import json
from array import array
from time import perf_counter_ns
from typing import Any

from harness.workload.builtin_tokenizer import VOCAB

#: Token i's text in a stream: " word" (every token carries its leading space).
WORD_BYTES: tuple[bytes, ...] = tuple((" " + w).encode() for w in VOCAB)
DONE_FRAME = b"e\r\ndata: [DONE]\n\n\r\n"

#: Write kinds as stored in a trace log (`array('q')` of flat triples: no GC-tracked objects
#: accumulate per token, so the cyclic GC never has to walk them).
KINDS = ("role", "content", "usage", "done")
ROLE, CONTENT, USAGE, DONE = range(4)


def new_trace_log() -> array:
    return array("q")


_FINISH = {None: b"null", "length": b'"length"', "stop": b'"stop"', "abort": b'"abort"'}


def usage_json(prompt: int, completion: int, cached: int | None = None) -> bytes:
    extra = b',"prompt_tokens_details":{"cached_tokens":%d}' % cached if cached is not None else b""
    return b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d%s}' % (
        prompt,
        prompt + completion,
        completion,
        extra,
    )


class SSEStream:
    """Writes one request's SSE events to its transport."""

    __slots__ = (
        "_details",
        "_fixed",
        "_head",
        "_mid",
        "_pre",
        "_tail_null",
        "cached_tokens",
        "chat",
        "closed",
        "completion_tokens",
        "continuous",
        "include_usage",
        "prompt_tokens",
        "trace",
        "transport",
    )

    def __init__(
        self,
        transport: Any,
        *,
        chat: bool,
        response_id: str,
        model: str,
        created: int,
        prompt_tokens: int,
        include_usage: bool,
        continuous_usage: bool,
        details: bool,
        trace: array | None,
    ) -> None:
        self.transport = transport
        self.chat = chat
        self.trace = trace
        self.closed = False
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = 0
        self.completion_tokens = 0
        self.include_usage = include_usage
        self.continuous = include_usage and continuous_usage
        self._details = details
        obj = "chat.completion.chunk" if chat else "text_completion"
        self._head = (
            f'data: {{"id":{json.dumps(response_id)},"object":"{obj}","created":{int(created)},'
            f'"model":{json.dumps(model)},"choices":'
        ).encode()
        if chat:
            self._pre = self._head + b'[{"index":0,"delta":{"content":"'
            self._mid = b'"},"logprobs":null,"finish_reason":'
        else:
            self._pre = self._head + b'[{"index":0,"text":"'
            self._mid = b'","logprobs":null,"finish_reason":'
        # the common case (mid-stream, no continuous usage): frame = hex(len) + pre + text + tail
        self._tail_null = self._mid + (b"null}]" if chat else b'null,"stop_reason":null}]') + b"}\n\n"
        self._fixed = len(self._pre) + len(self._tail_null)

    def _usage(self) -> bytes:
        return usage_json(self.prompt_tokens, self.completion_tokens, self.cached_tokens if self._details else None)

    def _write(self, payload: bytes, n_tokens: int, kind: int) -> bool:
        return self._send(b"%x\r\n%b\r\n" % (len(payload), payload), n_tokens, kind)

    def _send(self, frame: bytes, n_tokens: int, kind: int) -> bool:
        t = self.transport
        if self.closed or t.is_closing():
            self.closed = True
            return False
        t.write(frame)
        log = self.trace
        if log is not None:
            log.append(perf_counter_ns())
            log.append(n_tokens)
            log.append(kind)
        return True

    def role(self) -> bool:
        """Chat only: the role chunk that precedes the first token."""
        tail = b',"usage":' + self._usage() + b"}\n\n" if self.continuous else b"}\n\n"
        return self._write(
            self._head
            + b'[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]'
            + tail,
            0,
            ROLE,
        )

    def content(self, text: bytes, n_tokens: int, finish: str | None) -> bool:
        self.completion_tokens += n_tokens
        if finish is None and not self.continuous:  # hot path: one formatting, one write
            return self._send(
                b"%x\r\n%b%b%b\r\n" % (self._fixed + len(text), self._pre, text, self._tail_null), n_tokens, CONTENT
            )
        fin = _FINISH[finish]
        stop = b"}]" if self.chat and finish is None else b',"stop_reason":null}]'
        if self.continuous:
            payload = b"".join((self._pre, text, self._mid, fin, stop, b',"usage":', self._usage(), b"}\n\n"))
        else:
            payload = b"".join((self._pre, text, self._mid, fin, stop, b"}\n\n"))
        return self._write(payload, n_tokens, CONTENT)

    def finish(self, metrics: bytes | None = None) -> None:
        """The usage chunk (when asked for; with `metrics`, vLLM's per-request timings) and `[DONE]`."""
        if self.include_usage:
            tail = b',"metrics":' + metrics + b"}\n\n" if metrics is not None else b"}\n\n"
            self._write(self._head + b'[],"usage":' + self._usage() + tail, 0, USAGE)
        self._send(DONE_FRAME, 0, DONE)

    def is_disconnected(self) -> bool:
        return self.closed or self.transport.is_closing()


def request_metrics(req: Any) -> dict[str, float]:
    """vLLM 0.32's per-request `metrics` (`--enable-per-request-metrics`, built from the engine's
    RequestStateStats by build_per_request_timing_metrics): `time_to_first_token_ms` runs from the
    first scheduling to the first token (the prefill, queue excluded), `queue_time_ms` from when the
    engine took the request to its first scheduling, `generation_time_ms` from the first to the last
    token. A field whose stamps are missing is left out, as vLLM's exclude_none does."""
    out: dict[str, float] = {}
    queued, sched, first, last = req.queued, req.first_sched, req.first_token, req.last_token
    n = len(req.out_ids)
    if sched is not None and first is not None:
        out["time_to_first_token_ms"] = (first - sched) * 1000
    if first is not None and last is not None:
        out["generation_time_ms"] = (last - first) * 1000
    if queued is not None and sched is not None:
        out["queue_time_ms"] = (sched - queued) * 1000
    if first is not None and last is not None and n > 1:
        out["mean_itl_ms"] = (last - first) / (n - 1) * 1000
    if sched is not None and last is not None and last > sched:
        out["tokens_per_second"] = n / (last - sched)
    return out


def request_metrics_json(req: Any) -> bytes:
    return json.dumps(request_metrics(req), separators=(",", ":")).encode()


def completion_body(
    *,
    chat: bool,
    response_id: str,
    model: str,
    created: int,
    text: str,
    finish: str,
    prompt_tokens: int,
    completion_tokens: int,
    cached: int | None,
    logprobs: dict | None = None,
    metrics: dict[str, float] | None = None,
) -> dict:
    """A non-streaming response, shaped like vLLM's."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "tool_calls": []},
            "logprobs": logprobs,
            "finish_reason": finish,
            "stop_reason": None,
        }
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish, "stop_reason": None}
        obj = "text_completion"
    body = {"id": response_id, "object": obj, "created": created, "model": model, "choices": [choice], "usage": usage}
    if metrics is not None:
        body["metrics"] = metrics
    return body
