"""The server's own account of one request's time, read from its final SSE event.

Engines that time each request themselves put the figures in the response:

- vLLM (0.32 has it; `--enable-per-request-metrics`): a top-level `metrics` object on the final
  usage chunk (so `stream_options.include_usage` must be on): `queue_time_ms` (the engine core took
  the request -> first scheduled), `time_to_first_token_ms` (first scheduled -> first token: the
  prefill, queue excluded, despite its name), `generation_time_ms` (first -> last token). Built by
  vllm/entrypoints/generate/base/serving.py::build_per_request_timing_metrics from the engine's
  RequestStateStats; the simulated engine writes the same object in the same place.
- llama.cpp's llama-server: a `timings` object on the final chunk: `prompt_ms` (prompt
  processing), `predicted_ms` (generation); it has no queue time.

One reader per key, registered by name; `read` is called once per request on the event that
carried the final usage (never per token), after the stream has ended. A reader returns None
when the object is not what it expects (the request then simply has no server timing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.registry import Registry


@dataclass(frozen=True, slots=True)
class ServerTiming:
    source: str  # which reader: "vllm" (metrics) or "llama.cpp" (timings)
    queue_ms: float | None  # waiting for the scheduler (None: the server does not say)
    prefill_ms: float | None  # first scheduled -> first token
    decode_ms: float | None  # first -> last token


Reader = Callable[[Any], "ServerTiming | None"]
#: event key -> reader of the object under that key
READERS: Registry[Reader] = Registry("server timing reader")

#: what each source cannot tell, named in the report (joined per request, the rest is unknown)
NOT_REPORTED: dict[str, tuple[str, ...]] = {"vllm": (), "llama.cpp": ("queue",)}


def _ms(obj: dict[str, Any], key: str) -> float | None:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v < 0:
        return None
    return float(v)


@READERS.register("metrics")
def _vllm(obj: Any) -> ServerTiming | None:
    if not isinstance(obj, dict):
        return None
    t = ServerTiming(
        "vllm", _ms(obj, "queue_time_ms"), _ms(obj, "time_to_first_token_ms"), _ms(obj, "generation_time_ms")
    )
    return t if t.prefill_ms is not None or t.queue_ms is not None else None


@READERS.register("timings")
def _llamacpp(obj: Any) -> ServerTiming | None:
    if not isinstance(obj, dict):
        return None
    t = ServerTiming("llama.cpp", None, _ms(obj, "prompt_ms"), _ms(obj, "predicted_ms"))
    return t if t.prefill_ms is not None else None


def read(event: dict[str, Any]) -> ServerTiming | None:
    """The server timing the final event carries, if any."""
    for key in READERS:
        obj = event.get(key)
        if obj is not None:
            return READERS.get(key)(obj)
    return None
