"""A scriptable OpenAI-compatible streaming server for client tests (aiohttp, own thread).

Behaviour is chosen per request by the `model` field, so one server covers many cases:
  "ok"          role chunk, N one-token chunks, usage chunk, [DONE]
  "multi"       chunks of 3 tokens each (usage says the true total)
  "continuous"  every chunk carries cumulative usage (continuous_usage_stats)
  "reasoning"   first chunks stream delta.reasoning_content, then content
  "nousage"     no usage chunk at all
  "malformed"   a non-JSON data line after two tokens
  "cut"         closes the connection mid-stream
  "error500"    HTTP 500 with an OpenAI JSON error
  "error429"    HTTP 429
  "midstream"   an error event inside the stream
  "empty"       role chunk, usage with 0 tokens, [DONE]
  "chatml"      usage counts the prompt's words plus a ChatML-like template (5 per message + 4)
  "scaled"      as chatml, but 10 % more tokens than words (a tokenizer that counts differently)
N = max_tokens; ITL from the request's `itl_ms` extra field (default 1 ms).
`FakeOpenAI.authorization` lists the Authorization header of every request (None when absent).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading

from aiohttp import web


def _chunk(delta: dict, finish: str | None = None, usage: dict | None = None, completions: bool = False) -> bytes:
    if completions:
        choice = {"index": 0, "text": delta.get("content", ""), "finish_reason": finish}
    else:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "x", "object": "chat.completion.chunk", "choices": [choice]}
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


async def _handle(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    completions = request.path.endswith("/completions") and "chat" not in request.path
    model = body.get("model", "ok")
    n = int(body.get("max_tokens", 8))
    itl = float(body.get("itl_ms", 1.0)) / 1000
    prompt_tokens = 7
    if model in ("chatml", "scaled"):
        messages = body.get("messages") or [{"content": body.get("prompt", "")}]
        words = sum(len(str(m.get("content", "")).split()) for m in messages)
        prompt_tokens = (round(1.1 * words) if model == "scaled" else words) + 5 * len(messages) + 4
    if model == "error500":
        return web.json_response({"error": {"message": "boom", "type": "internal"}}, status=500)
    if model == "error429":
        return web.json_response({"error": {"message": "slow down"}}, status=429)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    if not completions:
        await resp.write(_chunk({"role": "assistant", "content": ""}))
    sent = 0
    step = 3 if model == "multi" else 1
    while sent < (0 if model == "empty" else n):
        await asyncio.sleep(itl)
        k = min(step, n - sent)
        sent += k
        if model == "cut" and sent > 2:
            request.transport.close()
            return resp
        if model == "malformed" and sent == 3:
            await resp.write(b"data: {not json\n\n")
            continue
        if model == "midstream" and sent == 3:
            await resp.write(b'data: {"error": {"message": "engine died"}}\n\n')
            continue
        key = "reasoning_content" if model == "reasoning" and sent <= 2 else "content"
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": sent} if model == "continuous" else None
        text = " ".join(["tok"] * k)
        await resp.write(_chunk({key: " " + text}, "length" if sent == n else None, usage, completions))
    if model != "nousage":
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": sent, "total_tokens": prompt_tokens + sent}
        await resp.write(b"data: " + json.dumps({"id": "x", "choices": [], "usage": usage}).encode() + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def _models(_request: web.Request) -> web.Response:
    return web.json_response({"data": [{"id": "ok"}, {"id": "chatml"}, {"id": "scaled"}]})


async def _health(_request: web.Request) -> web.Response:
    return web.Response(text="")


class FakeOpenAI:
    def __init__(self) -> None:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.authorization: list[str | None] = []

    @web.middleware
    async def _record(self, request: web.Request, handler):
        self.authorization.append(request.headers.get("Authorization"))
        return await handler(request)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(middlewares=[self._record])
        app.router.add_post("/v1/chat/completions", _handle)
        app.router.add_post("/v1/completions", _handle)
        app.router.add_get("/v1/models", _models)
        app.router.add_get("/health", _health)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(site.start())
        self._ready.set()
        self._loop.run_forever()

    def start(self) -> FakeOpenAI:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        async def _cleanup() -> None:
            await self._runner.cleanup()

        fut = asyncio.run_coroutine_threadsafe(_cleanup(), self._loop)
        try:
            fut.result(5)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
