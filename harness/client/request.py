"""Send one streaming request and return its RequestRecord, errors classified by kind.

Error kinds: http_429, http_5xx, http_4xx (with the server's message), connect,
connect_timeout, timeout, disconnect (closed mid-stream), malformed (bad SSE/JSON),
server_error (an error event inside the stream), incomplete (no [DONE]), empty_output,
cut (still in flight at the run's drain deadline, harness.load.deadlines).
Nothing hangs: every request has a deadline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.client.adapters.base import ApiAdapter, Prompt
from harness.client.http_stream import Connection, StreamError, StreamResult, perf_ns
from harness.client.redact import redact
from harness.client.sse import SSEError, interpret
from harness.metrics.record import RequestRecord
from harness.scenario.models import Sampling

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass
class RequestSpec:
    """Everything per-target that does not change between requests."""

    adapter: ApiAdapter
    model: str
    sampling: dict[str, Any]
    stream_options: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 600.0


def sampling_fields(sampling: Sampling) -> dict[str, Any]:
    """The request-body fields a scenario's `sampling` block asks for (same for every request)."""
    fields: dict[str, Any] = {"temperature": sampling.temperature, "top_p": sampling.top_p}
    if sampling.ignore_eos:
        fields["ignore_eos"] = True
    if sampling.seed is not None:
        fields["seed"] = sampling.seed
    fields.update(sampling.extra_body)
    return fields


def base_headers(api_key: str | None, extra: dict[str, str]) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "Accept-Encoding": "identity",
        "User-Agent": "harness",
    }
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    headers.update(extra)
    return headers


def build_payload(spec: RequestSpec, prompt: Prompt, model: str | None = None) -> bytes:
    """The request body; `model` overrides the target's (a LoRA adapter asked for by name)."""
    return _dumps(spec.adapter.build_body(prompt, model or spec.model, spec.sampling, spec.stream_options)).encode()


def execute(
    conn: Connection,
    spec: RequestSpec,
    payload: bytes,
    rec: RequestRecord,
    count_tokens: Callable[[str], int],
) -> RequestRecord:
    """Run the request on `conn`, filling `rec` (whose index/class/intended time are set)."""
    res = transfer(conn, spec, payload, rec)
    if res is not None:
        finalize(rec, res, spec, count_tokens)
    return rec


def transfer(conn: Connection, spec: RequestSpec, payload: bytes, rec: RequestRecord) -> StreamResult | None:
    """The time-critical half: connect, send, read and stamp. None when the transport failed.

    Interpretation (JSON decoding, token counts) is left to `finalize`, so a load process can run
    it when its event loop is idle instead of between two stamped reads.
    """
    headers = spec.headers
    if rec.request_id:
        headers = {**headers, "X-Request-Id": rec.request_id}
    try:
        rec.connect_ns = conn.connect()
        rec.clock = "kernel" if conn.kernel else "user"
        deadline = perf_ns() + int(spec.timeout_s * 1e9)
        _offset, rec.sent_ns, res = conn.request("POST", spec.adapter.path, headers, payload, deadline)
    except StreamError as exc:
        rec.sent_ns = rec.sent_ns or perf_ns()
        rec.error_kind, rec.error_detail = exc.kind, exc.detail
        return None
    rec.http_status = res.status
    return res


def finalize(
    rec: RequestRecord, res: StreamResult, spec: RequestSpec, count_tokens: Callable[[str], int]
) -> RequestRecord:
    """Classify the HTTP outcome and interpret the SSE stream into the record."""
    _classify(rec, res, spec, count_tokens)
    if rec.error_detail:  # what the server said is stored: never with a credential it echoed
        rec.error_detail = redact(rec.error_detail, _secrets(spec))
    return rec


def _classify(rec: RequestRecord, res: StreamResult, spec: RequestSpec, count_tokens: Callable[[str], int]) -> None:
    if res.status != 200:
        rec.error_kind = _status_kind(res.status)
        rec.error_detail = _error_message(res.body)
        return
    try:
        interpret(rec, res.lines, spec.adapter, count_tokens)
    except SSEError as exc:
        rec.error_kind, rec.error_detail = exc.kind, exc.detail
        return
    if not res.complete and rec.error_kind in (None, "incomplete"):
        rec.error_kind = "disconnect"
        rec.error_detail = "connection closed mid-stream"
    elif rec.error_kind is None and not rec.chunk_ns:
        rec.error_kind = "empty_output"
        rec.error_detail = "stream finished without any content"


def _secrets(spec: RequestSpec) -> tuple[str, ...]:
    """The credentials this request carried (the API key, whole header values), to mask in echoes."""
    auth = spec.headers.get("Authorization", "")
    return (auth, auth.partition(" ")[2]) if auth else ()


def _status_kind(status: int) -> str:
    if status == 429:
        return "http_429"
    if status >= 500:
        return "http_5xx"
    return "http_4xx"


def _error_message(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            # OpenAI/vLLM: {"error": {"message"}} or top-level "message"; FastAPI: {"detail": ...}
            return str(err.get("message") or err.get("detail") or err)[:300]
        return str(err)[:300]
    return text[:300]
