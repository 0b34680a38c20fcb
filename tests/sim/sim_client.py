"""A small asyncio client for the simulator tests: streams SSE and timestamps every event."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from dataclasses import dataclass, field
from time import perf_counter_ns

import aiohttp

from harness.workload.builtin_tokenizer import VOCAB


def words(n: int, rng: random.Random | None = None) -> str:
    rng = rng or random.Random()
    return " ".join(rng.choice(VOCAB) for _ in range(n))


@dataclass
class StreamResult:
    status: int
    headers: dict
    events: list[tuple[int, object]] = field(default_factory=list)  # (perf_counter_ns, json or "[DONE]")
    sent_ns: int = 0
    error: str | None = None

    @property
    def chunks(self) -> list[dict]:
        return [e for _, e in self.events if isinstance(e, dict)]

    @property
    def done(self) -> bool:
        return bool(self.events) and self.events[-1][1] == "[DONE]"

    def token_times(self) -> list[tuple[int, int]]:
        """(recv_ns, n_words) for each event that carries generated text."""
        out = []
        for t, e in self.events:
            if isinstance(e, dict) and e.get("choices"):
                c = e["choices"][0]
                text = c.get("text") if "text" in c else c.get("delta", {}).get("content")
                if text:
                    out.append((t, len(text.split())))
        return out

    def ttft_s(self) -> float:
        return (self.token_times()[0][0] - self.sent_ns) / 1e9

    def itls_s(self) -> list[float]:
        ts = [t for t, _ in self.token_times()]
        return [(b - a) / 1e9 for a, b in itertools.pairwise(ts)]


async def stream(
    session: aiohttp.ClientSession,
    url: str,
    body: dict,
    headers: dict | None = None,
    chat: bool = True,
    stop_after: int | None = None,
) -> StreamResult:
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = {**body, "stream": True}
    sent = perf_counter_ns()
    async with session.post(url + path, json=body, headers=headers or {}) as resp:
        res = StreamResult(resp.status, resp.headers.copy(), sent_ns=sent)
        if resp.status != 200:
            res.events.append((perf_counter_ns(), await resp.json()))
            return res
        try:
            async for raw in resp.content:
                now = perf_counter_ns()
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                res.events.append((now, data if data == "[DONE]" else json.loads(data)))
                if stop_after is not None and len(res.events) >= stop_after:
                    break
        except aiohttp.ClientPayloadError as exc:
            res.error = f"payload: {exc}"
        return res


async def post_json(
    session: aiohttp.ClientSession, url: str, path: str, body: dict, headers: dict | None = None
) -> tuple[int, dict, dict]:
    async with session.post(url + path, json=body, headers=headers or {}) as resp:
        return resp.status, resp.headers.copy(), await resp.json(content_type=None)


def run(coro):
    return asyncio.run(coro)


def chat_body(prompt: str, max_tokens: int, **extra) -> dict:
    return {
        "model": "sim-llama-8b",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        **extra,
    }


def p99(values: list[float]) -> float:
    from harness.metrics import percentile  # the harness's own definition (nearest rank)

    value = percentile.of_values(values, 99.0)
    assert value is not None, "p99 of no samples"
    return value
