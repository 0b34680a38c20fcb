"""The simulator's HTTP server (aiohttp) and its vLLM-like startup and shutdown.

Startup mirrors `vllm serve`: the port is bound first but not listened on; the "engine" then
loads weights, compiles, sizes the KV cache (a too-large `--max-model-len` or memory fraction
fails here with exit 1, before any HTTP), captures graphs (phases and their log lines in
startup.py, paced by `--startup-delay` / `--sim-*-s`), and only then listens. The first 200 from `/health` therefore means ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import random
import signal
import socket
import sys
import time
import uuid
from time import perf_counter, perf_counter_ns, time_ns

from aiohttp import web

from harness.sim import logs, startup
from harness.sim.config import GIB, SimConfig
from harness.sim.engine import Engine
from harness.sim.engine_base import EngineBase
from harness.sim.greedy import GreedyText, logprobs_body
from harness.sim.memory import MemoryPlan, StartupError, plan_memory
from harness.sim.metrics import SimCollector, Stats, make_registry, render
from harness.sim.protocol import ApiError, parse_generate
from harness.sim.request import SimRequest
from harness.sim.scripted import ScriptedEngine
from harness.sim.sse import CONTENT, SSEStream, completion_body, new_trace_log, request_metrics
from harness.sim.trace import TraceWriter
from harness.workload.builtin_tokenizer import VOCAB

VLLM_VERSION = "0.33.0"
SIM_VERSION = f"{VLLM_VERSION}+sim"

JUNK_METRICS = b'vllm:num_requests_running{engine="0" 3\n# TYPE broken\n<<<not prometheus>>> {{{ 12 ]]\n'
HTML_METRICS = b"<!DOCTYPE html><html><head><title>Metrics</title></head><body><h1>Dashboard</h1></body></html>\n"


def _json_error(err: ApiError, headers: dict | None = None) -> web.Response:
    return web.json_response(err.body(), status=err.status, headers=headers)


class SimServer:
    def __init__(self, cfg: SimConfig, plan: MemoryPlan) -> None:
        self.cfg = cfg
        self.plan = plan
        self.rng = random.Random(cfg.seed)
        spec_k = cfg.speculative.num_speculative_tokens if cfg.speculative else 0
        self.stats = Stats(plan.max_model_len, spec_k)
        self.registry = make_registry(SimCollector(self.stats, cfg, plan))
        self.engine: EngineBase = (
            ScriptedEngine(cfg, self.stats, self.rng) if cfg.scripted else Engine(cfg, plan, self.stats, self.rng)
        )
        self.trace = TraceWriter(cfg.trace_path) if cfg.trace_path else None
        self.received = 0
        self.created = int(time.time())
        self.inflight: set[SimRequest] = set()
        self.stop_event: asyncio.Event | None = None
        faults = cfg.faults
        if faults.crash_after_requests:
            self.engine.on_finished = self._maybe_crash_after_requests

    # -- app -------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        r = app.router
        r.add_get("/health", self.health)
        r.add_route("*", "/ping", self.health)
        r.add_get("/version", self.version)
        r.add_get("/v1/models", self.models)
        r.add_get("/load", self.load)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat_completions)
        r.add_post("/reset_prefix_cache", self.reset_prefix_cache)
        if self.cfg.faults.metrics != "absent":
            r.add_get("/metrics", self.metrics)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=503 if self.engine.dead else 200)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": SIM_VERSION})

    async def load(self, request: web.Request) -> web.Response:
        return web.json_response({"server_load": len(self.inflight)})

    async def models(self, request: web.Request) -> web.Response:
        data = [
            {
                "id": name,
                "object": "model",
                "created": self.created,
                "owned_by": "vllm",
                "root": name,
                "parent": None,
                "max_model_len": self.plan.max_model_len,
                "permission": [
                    {
                        "id": f"modelperm-{uuid.uuid4().hex}",
                        "object": "model_permission",
                        "created": self.created,
                        "allow_create_engine": False,
                        "allow_sampling": True,
                        "allow_logprobs": True,
                        "allow_search_indices": False,
                        "allow_view": True,
                        "allow_fine_tuning": False,
                        "organization": "*",
                        "group": None,
                        "is_blocking": False,
                    }
                ],
            }
            for name in self.cfg.served_model_names
        ]
        base = self.cfg.served_model_name
        for name, path in self.cfg.lora.modules.items() if self.cfg.lora is not None else ():
            data.append({**data[0], "id": name, "root": path, "parent": base})  # vLLM lists adapters beside the base
        return web.json_response({"object": "list", "data": data})

    async def metrics(self, request: web.Request) -> web.Response:
        mode = self.cfg.faults.metrics
        if mode == "slow":
            await asyncio.sleep(self.cfg.faults.metrics_delay_s)
        elif mode == "junk":
            return web.Response(body=JUNK_METRICS, content_type="text/plain")
        elif mode == "html":
            return web.Response(body=HTML_METRICS, content_type="text/html")
        body, content_type = render(self.registry, request.headers.get("Accept"))
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = content_type
        return resp

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        self.engine.reset_prefix_cache()
        return web.Response(status=200)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    # -- generation ------------------------------------------------------------------------
    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival, arrival_ns, wall_ns = perf_counter(), perf_counter_ns(), time_ns()
        self.received += 1
        rid = request.headers.get("X-Request-Id") or uuid.uuid4().hex
        headers = {"X-Request-Id": rid}
        if self.engine.dead:
            return _json_error(ApiError(500, "EngineCore encountered an issue; the engine is dead."), headers)
        cfg = self.cfg
        faults = cfg.faults
        if faults.error_rate and self.rng.random() < faults.error_rate:
            status = faults.error_status
            msg = "Too many requests (simulated)" if status == 429 else "Internal server error (simulated fault)"
            if status == 429:
                headers["Retry-After"] = "1"
            return _json_error(ApiError(status, msg), headers)
        try:
            body = await request.json(loads=json.loads)
        except (ValueError, UnicodeDecodeError):
            return _json_error(ApiError(400, "Invalid JSON in request body"), headers)
        try:
            params = parse_generate(
                body,
                chat=chat,
                served=cfg.served_model_names + cfg.lora_names,
                max_model_len=self.plan.max_model_len,
                force_usage=cfg.force_include_usage,
            )
        except ApiError as err:
            return _json_error(err, headers)
        response_id = ("chatcmpl-" if chat else "cmpl-") + rid
        created = int(time.time())
        trace = new_trace_log() if self.trace is not None else None
        req = SimRequest(
            rid=rid,
            response_id=response_id,
            chat=chat,
            created=created,
            prompt_words=params.prompt_words,
            max_tokens=params.max_tokens,
            min_tokens=params.min_tokens,
            ignore_eos=params.ignore_eos,
            arrival=arrival,
            arrival_ns=arrival_ns,
            arrival_wall_ns=wall_ns,
            transport=request.transport,
            trace=trace,
        )
        if cfg.lora is not None and params.model in cfg.lora.modules:
            req.lora = params.model
        if params.greedy:
            req.greedy = GreedyText(params.prompt_words, cfg.greedy_errors)
        resp: web.StreamResponse | None = None
        if params.stream:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8", **headers})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            req.stream = SSEStream(
                request.transport,
                chat=chat,
                response_id=response_id,
                model=cfg.served_model_name,
                created=created,
                prompt_tokens=req.prompt_len,
                include_usage=params.include_usage,
                continuous_usage=params.continuous_usage,
                details=cfg.prompt_tokens_details,
                trace=trace,
            )
        self.inflight.add(req)
        try:
            self.engine.submit(req)
            await req.done
        except asyncio.CancelledError:
            self.engine.abort(req)
            raise
        finally:
            self.inflight.discard(req)
        if resp is not None:
            if req.finish_reason != "abort":
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await resp.write_eof()
            self._record(req)
            return resp
        if req.finish_reason == "abort":
            self._record(req)
            return web.Response(status=499)
        text = "".join(" " + VOCAB[i] for i in req.out_ids)
        cached = max(0, req.cached_tokens) if cfg.prompt_tokens_details else None
        out = completion_body(
            chat=chat,
            response_id=response_id,
            model=cfg.served_model_name,
            created=created,
            text=text,
            finish=req.finish_reason or "length",
            prompt_tokens=req.prompt_len,
            completion_tokens=len(req.out_ids),
            cached=cached,
            metrics=request_metrics(req) if cfg.per_request_metrics else None,
            logprobs=logprobs_body(req, chat, params.logprobs) if params.logprobs is not None else None,
        )
        full = web.json_response(out, headers=headers)
        await full.prepare(request)
        await full.write_eof()
        if trace is not None:
            trace.extend((perf_counter_ns(), len(req.out_ids), CONTENT))
        self._record(req)
        return full

    def _record(self, req: SimRequest) -> None:
        if self.trace is not None:
            self.trace.record(req)

    # -- faults ----------------------------------------------------------------------------
    def _maybe_crash_after_requests(self, finished: int) -> None:
        n = self.cfg.faults.crash_after_requests
        if finished >= n:
            # let the last response's final bytes go out first
            asyncio.get_running_loop().call_later(0.05, self.crash, f"--fault-crash-after-requests {n}")

    def crash(self, why: str) -> None:
        logs.log(logs.CORE, "core.py:952", "EngineCore encountered a fatal error.", level="ERROR")
        logs.error_lines(
            [
                f"RuntimeError: simulated engine crash ({why})",
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
            ]
        )
        if self.trace is not None:
            self.trace.close()
        os._exit(1)

    # -- periodic tasks --------------------------------------------------------------------
    async def stats_logger(self, interval: float) -> None:
        s = self.stats
        last = perf_counter()
        preempt0 = s.num_preemptions
        behind0, modelled0 = s.behind_s, s.modelled_s
        while True:
            await asyncio.sleep(interval)
            now = perf_counter()
            dt = max(1e-9, now - last)
            last = now
            prompt_tps = s.log_prompt_tokens / dt
            gen_tps = s.log_generation_tokens / dt
            idle = not (s.log_prompt_tokens or s.log_generation_tokens or s.num_running or s.num_waiting)
            queries, hits = s.log_queries, s.log_hits
            s.log_prompt_tokens = s.log_generation_tokens = s.log_queries = s.log_hits = 0
            if idle:
                continue  # vLLM logs idle intervals at DEBUG
            msg = (
                f"Engine 000: Avg prompt throughput: {prompt_tps:.1f} tokens/s, Avg generation throughput: "
                f"{gen_tps:.1f} tokens/s, Running: {s.num_running} reqs, Waiting: {s.num_waiting} reqs, "
            )
            if s.num_preemptions != preempt0:
                msg += f"Preemptions: {s.num_preemptions - preempt0}, "
                preempt0 = s.num_preemptions
            msg += f"GPU KV cache usage: {s.kv_usage * 100:.1f}%"
            if self.cfg.enable_prefix_caching and not self.cfg.scripted:
                msg += f", Prefix cache hit rate: {(hits / queries * 100) if queries else 0.0:.1f}%"
            logs.log(logs.API, "loggers.py:257", msg)
            behind, modelled = s.behind_s - behind0, s.modelled_s - modelled0
            behind0, modelled0 = s.behind_s, s.modelled_s
            if behind > 0.05 * (behind + modelled) and behind >= 0.01:
                logs.log(
                    logs.CORE,
                    "sim",
                    f"Simulator fell behind its schedule by {behind:.3f} s in the last "
                    f"{dt:.0f} s ({100 * behind / (behind + modelled):.0f}% of its busy time): the host did not "
                    "give it the CPU in time, so its timings are slower than its model",
                    level="WARNING",
                )

    async def trace_flusher(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            if self.trace is not None:
                self.trace.flush()


def _bind(host: str, port: int) -> socket.socket:
    """Bind without listening, as vLLM's setup_server() does: probes get connection-refused."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family = infos[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(infos[0][4])
    sock.setblocking(False)
    return sock


async def serve(cfg: SimConfig) -> int:
    loop = asyncio.get_running_loop()
    try:
        sock = _bind(cfg.host, cfg.port)
    except OSError as exc:
        logs.error_lines([f"OSError: [Errno {exc.errno}] {exc.strerror}: could not bind {cfg.host}:{cfg.port}"])
        return 1
    logs.log(logs.API, "api_server.py:1885", f"vLLM API server version {VLLM_VERSION} (simulated engine)")
    name = cfg.served_model_name
    logs.log(
        logs.CORE,
        "core.py:134",
        f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: model='{name}', "
        f"dtype=torch.bfloat16, max_seq_len={cfg.max_model_len or cfg.model.max_position}, "
        f"tensor_parallel_size={cfg.tensor_parallel_size}, quantization={startup.quantization_text(cfg)}, "
        f"enforce_eager={cfg.enforce_eager}, kv_cache_dtype={cfg.kv_cache_dtype}, seed={cfg.seed}, "
        f"served_model_name={name}, enable_prefix_caching={cfg.enable_prefix_caching}, "
        f"enable_chunked_prefill={cfg.enable_chunked_prefill}, "
        f"compilation_config={startup.compilation_config_text(cfg)}",
    )
    await startup.load_weights(cfg)
    try:
        plan = plan_memory(cfg)
    except StartupError as err:
        logs.log(logs.CORE, "core.py:708", "EngineCore failed to start.", level="ERROR")
        logs.error_lines(err.lines)
        sock.close()
        return 1
    init_t0 = perf_counter()
    compile_s = await startup.compile_model(cfg)  # the profiling run is what triggers compilation
    await startup.profile_kv(cfg)
    logs.log(logs.CORE, "gpu_worker.py:298", f"Available KV cache memory: {plan.available_kv_bytes / GIB:.2f} GiB")
    startup.log_max_model_len_fit(cfg, plan.max_model_len, plan.available_kv_bytes)
    if cfg.num_gpu_blocks_override is not None:
        logs.log(
            logs.CORE,
            "kv_cache_utils.py:1087",
            f"Overriding num_gpu_blocks={plan.available_kv_bytes // (cfg.kv_bytes_per_token * cfg.block_size)} "
            f"with num_gpu_blocks_override={plan.num_gpu_blocks}",
        )
    logs.log(
        logs.CORE,
        "kv_cache_utils.py:1233",
        f"GPU KV cache size: {plan.kv_cache_size_tokens:,} tokens, Maximum concurrency for "
        f"{plan.max_model_len:,} tokens per request: {plan.max_concurrency:.2f}x",
    )
    await startup.capture_graphs(cfg, plan.graph_bytes)
    init_s = perf_counter() - init_t0
    tail = f" (compilation: {compile_s:.2f} s)" if compile_s else ""
    logs.log(
        logs.CORE, "core.py:210", f"init engine (profile, create kv cache, warmup model) took {init_s:.2f} s{tail}"
    )
    if cfg.scripted:
        sc = cfg.scripted
        logs.log(logs.CORE, "sim", f"Scripted mode: TTFT {sc.ttft_ms} ms, ITL {sc.itl_ms} ms, jitter {sc.jitter_ms} ms")
    assert cfg.startup is not None
    await asyncio.sleep(cfg.startup.init_s)

    server = SimServer(cfg, plan)
    server.engine.start()
    stop = asyncio.Event()
    server.stop_event = stop
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    site = web.SockSite(runner, sock, backlog=1024)
    tasks = [loop.create_task(server.trace_flusher())]
    if cfg.log_stats:
        tasks.append(loop.create_task(server.stats_logger(cfg.log_stats_interval)))
    logs.log(logs.API, "api_server.py:1800", "Supported tasks: ['generate']")
    host_shown = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    port = sock.getsockname()[1]  # the real one when --port 0
    logs.log(logs.API, "api_server.py:1928", f"Starting vLLM server on http://{host_shown}:{port}")
    await site.start()
    # Everything built so far lives until exit: move it out of the cyclic GC's reach so a full
    # collection while streaming only walks per-request objects (shorter pauses, less lateness).
    gc.collect()
    gc.freeze()
    logs.log(logs.API, "launcher.py:46", "Application startup complete.")
    if cfg.faults.crash_after_s:
        loop.call_later(cfg.faults.crash_after_s, server.crash, f"--fault-crash-after-s {cfg.faults.crash_after_s}")
    await stop.wait()

    logs.log(logs.API, "launcher.py:80", "Shutting down FastAPI HTTP server.")
    logs.log(logs.CORE, "sim", server.stats.lag_summary())
    server.engine.stop()
    for t in tasks:
        t.cancel()
    for req in list(server.inflight):
        server.engine.abort(req)
    if server.trace is not None:
        server.trace.close()
    with contextlib.suppress(Exception):  # exiting anyway (a timeout too)
        await asyncio.wait_for(runner.cleanup(), 2.0)
    sys.stdout.flush()
    return 0
