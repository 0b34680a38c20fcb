"""The `block_trace:` block of a request class: prompts replayed from a trace of hashed prefix blocks.

Production traces cannot ship prompts, so the widely used format (Mooncake's FAST'25 traces,
also read by AIPerf and Dynamo) records per request its arrival `timestamp` (ms), `input_length`,
`output_length` and `hash_ids`: one id per `block_tokens`-token block of the prompt (512 in
Mooncake's traces), equal ids meaning equal prefixes. Replaying it, requests that share a block
id share those tokens exactly, so the engine's prefix cache sees the trace's real reuse. Records
with a `session_id` (AIPerf's multi-turn extension) are a session's turns, sent in order, each
after the previous one ended (not before its own timestamp; `delay` in ms, when given, instead
waits that long after the previous turn). The arrival times come from the same file
(`load.arrival: trace`, filled in from here when `load.trace` is not given) or from a closed loop.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class BlockTrace(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)

    path: Annotated[str, Field(min_length=1)] = Field(description="JSONL trace, relative to the scenario file")
    block_tokens: Annotated[int, Field(gt=0, le=65536)] = Field(
        default=512, description="tokens per hash id (Mooncake: 512; Alibaba Bailian traces: 16)"
    )
    engine_block: Annotated[int, Field(gt=0, le=65536)] = Field(
        default=16, description="the engine's KV block size, for the ideal hit rate (vLLM GPU: 16, its CPU build: 128)"
    )
    unit: Literal["s", "ms", "us"] = Field(default="ms", description="unit of `timestamp` and `delay` (Mooncake: ms)")
