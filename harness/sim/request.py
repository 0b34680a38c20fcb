"""One generation request as both engines (batching and scripted) see it."""

from __future__ import annotations

import asyncio
from typing import Any

from harness.sim.sse import SSEStream

WAITING, RUNNING, FINISHED = 0, 1, 2


class SimRequest:
    __slots__ = (
        "arrival",
        "arrival_ns",
        "arrival_wall_ns",
        "block_hashes",
        "blocks",
        "cached_tokens",
        "chat",
        "created",
        "disconnect_after",
        "done",
        "finish_reason",
        "first_sched",
        "first_token",
        "greedy",
        "ignore_eos",
        "last_token",
        "lora",
        "max_tokens",
        "min_tokens",
        "num_cached_blocks",
        "num_computed",
        "out_ids",
        "preemptions",
        "prompt_len",
        "queued",
        "response_id",
        "rid",
        "status",
        "stream",
        "tokens",
        "trace",
        "transport",
    )

    def __init__(
        self,
        *,
        rid: str,
        response_id: str,
        chat: bool,
        created: int,
        prompt_words: list[str],
        max_tokens: int,
        min_tokens: int,
        ignore_eos: bool,
        arrival: float,
        arrival_ns: int,
        arrival_wall_ns: int,
        transport: Any,
        trace: Any,
    ) -> None:
        self.rid = rid
        self.response_id = response_id
        self.chat = chat
        self.created = created
        self.prompt_len = len(prompt_words)
        # The engine needs at least one token to prefill; an empty prompt still reports 0 tokens.
        self.tokens: list[str] = prompt_words if prompt_words else ["<bos>"]
        self.out_ids: list[int] = []
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.ignore_eos = ignore_eos
        self.arrival = arrival  # time.perf_counter()
        self.arrival_ns = arrival_ns
        self.arrival_wall_ns = arrival_wall_ns
        self.stream: SSEStream | None = None
        self.transport = transport
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.status = WAITING
        self.queued: float | None = None  # perf_counter when the engine took it (vLLM's queued_ts)
        self.num_computed = 0
        self.blocks: list[int] = []
        self.block_hashes: list[int] = []
        self.num_cached_blocks = 0
        self.cached_tokens = -1  # prefix-cache hits at first admission; -1 = not admitted yet
        self.first_sched: float | None = None
        self.first_token: float | None = None
        self.last_token: float | None = None
        self.preemptions = 0
        self.finish_reason: str | None = None
        self.disconnect_after: int | None = None  # fault: close the connection after this many tokens
        self.trace = trace
        self.lora: str | None = None  # the LoRA adapter this request asked for by name
        self.greedy: Any = None  # a harness.sim.greedy.GreedyText for temperature-0 requests

    def is_disconnected(self) -> bool:
        if self.stream is not None:
            return self.stream.is_disconnected()
        t = self.transport
        return t is None or t.is_closing()
