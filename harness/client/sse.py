"""Turn a stamped SSE stream into the fields of a RequestRecord.

Runs after the stream has ended (off the read path). Token counts per chunk come, in order of
trust, from cumulative `usage` on every chunk (`continuous_usage_stats`), from the final usage
when it equals the number of content chunks (one token each), or from the tokenizer's count of
each chunk's text scaled to the server's total. With no usage at all, the tokenizer's count is
the total and the record says so (`output_source = "tokenizer"`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

# orjson (a dependency) decodes an SSE event ~5x faster than json; the post-stream path is per token
from orjson import JSONDecodeError as _DecodeError
from orjson import loads as _loads

from harness.client import http_stream, server_timing
from harness.client.adapters.base import ApiAdapter
from harness.client.adapters.openai_chat import OpenAIChat
from harness.client.adapters.openai_completions import OpenAICompletions
from harness.client.http_stream import _native
from harness.metrics.record import RequestRecord


class SSEError(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def interpret(
    rec: RequestRecord,
    lines: list[tuple[int, bytes]],
    adapter: ApiAdapter,
    count_tokens: Callable[[str], int],
) -> None:
    """Fill rec's chunk times, tokens per chunk, usage and output count from the SSE lines."""
    scanned = _scan_native(lines, adapter)
    if scanned is not None:
        chunk_ns, texts, cumulative, usage, usage_event, done, done_ns, role_ns, last_choice_event, coalesced = scanned
        if done:
            rec.done_ns = done_ns
        if role_ns is not None and rec.role_ns is None:
            rec.role_ns = role_ns
    else:
        chunk_ns, texts, cumulative, usage, usage_event, done, last_choice_event = _scan(rec, lines, adapter)
        # content chunks that arrived in the same read as the previous one share its stamp
        coalesced = sum(1 for a, b in itertools.pairwise(chunk_ns) if a == b)
    rec.events = len(lines)
    rec.chunk_ns = chunk_ns
    rec.coalesced_reads = coalesced
    if usage:
        rec.input_tokens = usage.get("prompt_tokens")
        details = usage.get("prompt_tokens_details") or {}
        rec.cached_tokens = details.get("cached_tokens")
    # the server's own timing of the request: read once, from the final events only (never per token)
    for final in (usage_event, last_choice_event):
        timing = server_timing.read(final) if final is not None else None
        if timing is not None:
            rec.server_timing = timing.source
            rec.server_queue_ns = None if timing.queue_ms is None else round(timing.queue_ms * 1e6)
            rec.server_prefill_ns = None if timing.prefill_ms is None else round(timing.prefill_ms * 1e6)
            rec.server_decode_ns = None if timing.decode_ms is None else round(timing.decode_ms * 1e6)
            break
    full_text = "".join(texts)
    if rec.session is not None:  # a multi-turn session sends this reply back as history
        rec.reply_text = full_text
    rec.tokenizer_output_tokens = count_tokens(full_text) if texts else 0
    n_server = usage.get("completion_tokens") if usage else None
    rec.chunk_tokens = _tokens_per_chunk(texts, cumulative, n_server, count_tokens)
    if n_server is not None:
        rec.output_tokens = n_server
        rec.output_source = "continuous_usage" if all(c is not None for c in cumulative) and cumulative else "usage"
    else:
        rec.output_tokens = sum(rec.chunk_tokens)
        rec.output_source = "tokenizer"
    # [DONE] is OpenAI's end marker, but some servers (transformers serve) end the stream after
    # the chunk with finish_reason; either one means the server finished the response
    finished = last_choice_event is not None and adapter.finish_reason(last_choice_event) is not None
    if not done and not finished and rec.error_kind is None:
        rec.error_kind = "incomplete"
        rec.error_detail = "stream ended without a finish_reason or data: [DONE]"


def _scan(rec: RequestRecord, lines: list[tuple[int, bytes]], adapter: ApiAdapter) -> tuple[Any, ...]:
    """The events' content chunks, usage and end marks: the reference loop (the native scan
    agrees with it or hands the stream back here; tests/client/test_native_scan.py)."""
    chunk_ns: list[int] = []
    texts: list[str] = []
    cumulative: list[int | None] = []
    usage: dict[str, Any] | None = None
    usage_event: dict[str, Any] | None = None  # the last event with usage: the server's timings ride on it
    done = False
    last_choice_event: dict[str, Any] | None = None
    content_of = adapter.content
    for stamp, line in lines:
        payload = line[5:].strip()
        if payload == b"[DONE]":
            done = True
            rec.done_ns = stamp
            continue
        if not payload:
            continue
        try:
            event = _loads(payload)
        except (ValueError, _DecodeError):
            raise SSEError("malformed", f"not JSON: {payload[:120]!r}") from None
        if not isinstance(event, dict):
            raise SSEError("malformed", f"event is not an object: {payload[:120]!r}")
        if "error" in event and not event.get("choices"):
            err = event["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            raise SSEError("server_error", f"error event mid-stream: {str(msg)[:200]}")
        ev_usage = event.get("usage")
        if ev_usage is not None:
            _check_usage(ev_usage, payload)
        if ev_usage:
            usage, usage_event = ev_usage, event
        try:
            text = content_of(event)
        except (ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
            # a server's odd event shape is the server's fault: count it, never crash the load process
            raise SSEError("malformed", f"unexpected event shape ({exc}): {payload[:120]!r}") from None
        if text is not None:
            last_choice_event = event
        if text:
            chunk_ns.append(stamp)
            texts.append(text)
            cumulative.append(ev_usage.get("completion_tokens") if ev_usage else None)
        elif text is not None and rec.role_ns is None and not chunk_ns:
            rec.role_ns = stamp  # role-only (or empty) chunk before any content
    return chunk_ns, texts, cumulative, usage, usage_event, done, last_choice_event


#: adapters whose content rule the native scan knows (harness/client/_native.c `scan`)
_NATIVE_KINDS: dict[type, int] = {}
if _native is not None:
    _NATIVE_KINDS = {OpenAIChat: _native.KIND_CHAT, OpenAICompletions: _native.KIND_COMPLETIONS}


def _scan_native(lines: list[tuple[int, bytes]], adapter: ApiAdapter) -> tuple[Any, ...] | None:
    """The events scanned in C when this process reads natively (one JSON decode per stream, no
    Python per event); None: the Python loop decides (another adapter, the fallback reader, or an
    event that is not clean, whose error the Python loop then raises)."""
    if http_stream.READER != "native":
        return None
    kind = _NATIVE_KINDS.get(type(adapter))
    if kind is None:
        return None
    return _native.scan(lines, kind, _loads)


_COUNT_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _check_usage(usage: Any, payload: bytes) -> None:
    """`usage` must be an object whose token counts are integers (or absent/null)."""
    if not isinstance(usage, dict):
        raise SSEError("malformed", f"usage is not an object: {payload[:120]!r}")
    for name in _COUNT_FIELDS:
        value = usage.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise SSEError("malformed", f"usage.{name} is not a token count ({str(value)[:40]!r}): {payload[:120]!r}")
    details = usage.get("prompt_tokens_details")
    if details is not None and not isinstance(details, dict):
        raise SSEError("malformed", f"usage.prompt_tokens_details is not an object: {payload[:120]!r}")
    cached = details.get("cached_tokens") if details else None
    if cached is not None and (isinstance(cached, bool) or not isinstance(cached, int)):
        raise SSEError(
            "malformed", f"usage.prompt_tokens_details.cached_tokens is not a token count: {payload[:120]!r}"
        )


def _tokens_per_chunk(
    texts: list[str], cumulative: list[int | None], n_server: int | None, count_tokens: Callable[[str], int]
) -> list[int]:
    m = len(texts)
    if m == 0:
        return []
    counts = [c for c in cumulative if c is not None]
    if len(counts) == len(cumulative):  # cumulative usage on every chunk
        out, prev = [], 0
        for c in counts:
            out.append(max(int(c) - prev, 1))
            prev = int(c)
        return out
    if n_server is not None and n_server == m:
        return [1] * m
    estimates = [max(count_tokens(t), 1) for t in texts]
    if n_server is None or n_server <= 0:
        return estimates
    # scale the tokenizer's per-chunk estimates to the server's total (largest remainder)
    total = sum(estimates)
    raw = [e * n_server / total for e in estimates]
    out = [max(int(r), 1) for r in raw]
    short = n_server - sum(out)
    if short > 0:
        order = sorted(range(m), key=lambda i: raw[i] - int(raw[i]), reverse=True)
        for i in order[:short]:
            out[i] += 1
    return out
