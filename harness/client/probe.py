"""The preflight's test request: one small streamed request with a total deadline, judged.

Why not urllib: its timeout is per socket operation, so a never-ending stream kept the
preflight waiting forever; and a 200 alone says nothing (an HTML page, a gzip body, a JSON
answer that ignored `stream: true`, or junk events all passed and then failed every request of
the run). Here the response is read by the run's own HTTP reader under one deadline and then
interpreted as the run would, and a bad answer is named with a hint.
"""

from __future__ import annotations

from harness.client.adapters.base import ApiAdapter
from harness.client.http_stream import Connection, Endpoint, StreamResult, perf_ns
from harness.client.sse import SSEError, interpret
from harness.metrics.record import RequestRecord

PROBE_DEADLINE_S = 20.0


def send_probe(
    base_url: str, path: str, headers: dict[str, str], body: bytes, deadline_s: float | None = None
) -> StreamResult:
    """POST `body` and read the whole response within `deadline_s`; StreamError otherwise."""
    deadline_s = deadline_s or PROBE_DEADLINE_S
    for name, value in headers.items():
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"header {name!r} contains a line break")
    all_headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "Accept-Encoding": "identity",
        "User-Agent": "harness",
        **headers,
    }
    conn = Connection(Endpoint.parse(base_url), timeout_s=deadline_s, kernel_stamps=False)
    try:
        deadline = perf_ns() + int(deadline_s * 1e9)
        _offset, _sent, res = conn.request("POST", path, all_headers, body, deadline)
        return res
    finally:
        conn.close()


def stream_problem(res: StreamResult, adapter: ApiAdapter) -> str | None:
    """What is wrong with a 200 answer to the probe, with a hint; None for a usable stream."""
    encoding = res.headers.get("content-encoding", "identity").lower()
    if encoding not in ("", "identity"):
        return (
            f"the body is {encoding}-encoded although the request asked for identity; turn response "
            "compression off for this endpoint (server or proxy)"
        )
    ctype = res.headers.get("content-type", "")
    if "text/event-stream" not in ctype:
        snippet = res.body[:80].decode("utf-8", "replace").strip()
        if "json" in ctype or snippet.startswith("{"):
            return (
                "a plain JSON body, not an event stream: the server ignored stream: true; harness measures "
                f"streaming OpenAI-compatible endpoints ({snippet!r})"
            )
        if "html" in ctype or snippet.lower().startswith("<"):
            return (
                f"an HTML page ({snippet!r}), not an event stream; is --target the engine's base URL "
                "(not a web page, dashboard or proxy login)?"
            )
        return f"content-type {ctype or 'none'!r}, not text/event-stream ({snippet!r})"
    if not res.lines:
        return "an event stream without any data: line; is this an OpenAI-compatible streaming endpoint?"
    rec = RequestRecord(index=0, class_name="probe")
    try:
        interpret(rec, res.lines, adapter, lambda text: len(text.split()))
    except SSEError as exc:
        return f"a stream the harness cannot read ({exc.kind}: {exc.detail[:160]})"
    if rec.error_kind is not None:
        return f"a stream the harness cannot use ({rec.error_kind}: {rec.error_detail})"
    return None
