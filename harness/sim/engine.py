"""The continuous-batching engine: a vLLM V1-style scheduler loop over a paged KV cache.

Each iteration (an asyncio task, one "GPU step"):

1. Drop requests whose client went away (their blocks are freed).
2. Schedule, within `max_num_batched_tokens`:
   * running requests first, in arrival order: a decode needs 1 token (1 + k with speculative
     decoding), an unfinished chunked prefill its next chunk. When a request needs a new KV block
     and none is free, the newest running request is preempted (recompute: its blocks are freed
     and it goes back to the head of the queue), counted in `vllm:num_preemptions`;
   * then, if nothing was preempted, waiting requests in FIFO order while `max_num_seqs` and free
     blocks allow. The prefix cache supplies the longest cached run of full blocks. With chunked
     prefill a prompt is split to fit the budget; without it a prompt that does not fit the
     remaining budget waits, and a long prompt makes a long step that stalls every decode.
     With `--sim-admit-full-prompt` (vLLM's --scheduler-reserve-full-isl, its default since
     2026) the blocks of the whole sequence (prompt, plus the output so far of a preempted
     request) must be free, not just the first chunk's: a long prompt then waits instead of
     being admitted, prefilled part way, and preempting the newest request when decodes grow.
3. Price the step with the cost model and sleep until its absolute deadline (the next step's
   clock starts from this deadline, not from when the work finished, so steps do not drift).
   The simulator measures its own lag: how late each step woke against its deadline, and the
   time its schedule fell behind for good (a step that could start only SLIP_S or more after the
   previous deadline, because the process did not get the CPU in time). Both are on /metrics
   (`sim_step_lag_seconds`, `sim_behind_seconds_total`, beside `sim_modelled_seconds_total`)
   and in the log, and the harness marks a run invalid when they are large.
4. Apply it: advance computed tokens, sample one token per finished prefill / decode (plus the
   accepted draft tokens), register newly full blocks in the prefix cache, stream the tokens,
   finish requests on `max_tokens` or a sampled EOS.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections import deque
from time import perf_counter

from harness.sim.config import SimConfig
from harness.sim.costmodel import CostModel
from harness.sim.engine_base import VOCAB_SIZE, EngineBase
from harness.sim.graphs import GraphPool
from harness.sim.kv_cache import BlockPool, block_hash
from harness.sim.lora import LoraSlots
from harness.sim.memory import MemoryPlan
from harness.sim.metrics import Stats
from harness.sim.request import FINISHED, RUNNING, WAITING, SimRequest
from harness.workload.builtin_tokenizer import VOCAB

#: a step that starts this long after the previous one was due moves the schedule: the simulator
#: fell behind its model (busy host) instead of catching up within the next step
SLIP_S = 0.005


class Engine(EngineBase):
    def __init__(self, cfg: SimConfig, plan: MemoryPlan, stats: Stats, rng: random.Random) -> None:
        super().__init__(cfg, stats, rng)
        self.plan = plan
        self.bs = cfg.block_size
        self.pool = BlockPool(plan.num_gpu_blocks, cfg.block_size, cfg.enable_prefix_caching)
        self.cost = CostModel.from_config(cfg)
        self.graphs = GraphPool(cfg, plan, stats)  # recompiles + graph-pool growth for uncaptured sizes
        self.max_model_len = plan.max_model_len
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        spec = cfg.speculative
        self.spec_k = spec.num_speculative_tokens if spec else 0
        self.spec_p = spec.acceptance_rate if spec else 0.0
        faults = cfg.faults
        self._stall_every = faults.stall_every_s if faults.stall_ms > 0 else 0.0
        self._next_stall = 0.0
        self.lora = LoraSlots(cfg.lora) if cfg.lora is not None else None
        self.lora_load_s = 0.0  # adapter loads the step being scheduled pays for

    # -- interface -------------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._stall_every:
            self._next_stall = loop.time() + self._stall_every
        self._task = loop.create_task(self._run())
        self._task.add_done_callback(self._on_loop_exit)

    def _on_loop_exit(self, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is None:
            return
        # A bug in the simulator: behave like vLLM's EngineDeadError (/health 503, requests fail).
        import traceback

        self.dead = True
        traceback.print_exception(task.exception(), file=sys.stderr)
        for req in list(self.running) + list(self.waiting):
            self.pool.release(req.blocks)
            req.blocks = []
            self._finish(req, "error")
        self.running.clear()
        self.waiting.clear()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def submit(self, req: SimRequest) -> None:
        """Queue a request; with a request overhead (API server, tokenization: a profile's) it
        reaches the scheduler that much later, as in vLLM where the front end runs beside the engine.
        The API server is one event loop that also streams every running sequence's tokens, so a
        new request waits longer the more sequences run (`frontend_seq_s` each: on the H200 the
        part of TTFT outside the engine grew from 6.7 ms at 1 chat user to 102 ms at 96)."""
        delay = self.admission_delay_s()
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self._admit, req)
        else:
            self._admit(req)

    def admission_delay_s(self) -> float:
        """Seconds a request arriving now spends in the API server before the scheduler sees it."""
        cfg = self.cfg
        return (cfg.request_overhead_s + cfg.frontend_seq_s * len(self.running)) / cfg.speed

    def _admit(self, req: SimRequest) -> None:
        if req.status == FINISHED:  # aborted (client gone) before it reached the scheduler
            return
        req.queued = perf_counter()
        self._draw_disconnect(req)
        self._hash_blocks(req)
        self.waiting.append(req)
        self.stats.num_waiting = len(self.waiting)
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        if req.status == FINISHED:
            return
        if req.status == WAITING:
            with contextlib.suppress(ValueError):
                self.waiting.remove(req)
        else:
            with contextlib.suppress(ValueError):
                self.running.remove(req)
            self.pool.release(req.blocks)
            req.blocks = []
        self._finish(req, "abort")
        self._update_gauges()

    def reset_prefix_cache(self) -> bool:
        return self.pool.reset_prefix_cache()

    # -- loop ------------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        prev_deadline: float | None = None
        while True:
            self._drop_disconnected()
            if not self.running and not self.waiting:
                self._update_gauges()
                self._wake.clear()
                await self._wake.wait()
                prev_deadline = None
                continue
            items, prefill, decode, context = self._schedule()
            self._update_gauges()
            if not items:  # nothing fits right now (cannot happen with a valid plan); wait for a change
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 0.01)
                prev_deadline = None
                continue
            duration = self.cost.step_seconds(prefill, decode, context, self.spec_k > 0, len(items))
            duration += self.graphs.step(
                prefill, len(items)
            )  # graphs are per batch of sequences (x 1+k with speculation)
            duration += self.lora_load_s / self.cfg.speed  # adapters loaded into GPU slots for this step
            now = loop.time()
            # Start from the previous deadline unless we fell more than SLIP_S behind: then the
            # schedule moves to now, and that time is lost for good (the simulator ran slower
            # than its model: counted, so the harness can say so).
            slipped = 0.0  # how late this step started against its schedule, when the schedule moved
            if prev_deadline is not None and now - prev_deadline < SLIP_S:
                start = prev_deadline
            else:
                if prev_deadline is not None:
                    slipped = now - prev_deadline
                    self.stats.behind_s += slipped
                start = now
            deadline = start + duration
            if self._stall_every and deadline >= self._next_stall:
                deadline += self.cfg.faults.stall_ms / 1000.0
                self._next_stall += self._stall_every
                if self._next_stall <= deadline:  # we were idle through some periods
                    self._next_stall = deadline + self._stall_every
            delay = deadline - loop.time()
            await asyncio.sleep(delay if delay > 0 else 0)
            stats = self.stats
            # how late this step's tokens go out against the schedule it was on: a stall between two
            # steps (the process stopped outside its sleep) makes the next step's tokens late by the
            # slip, though the moved schedule's own deadline is then met
            stats.lag(loop.time() - deadline + slipped)
            stats.modelled_s += deadline - start
            stats.steps += 1
            stats.iteration_tokens.observe(prefill + decode)
            self._apply(items)
            self._update_gauges()
            prev_deadline = deadline

    def _update_gauges(self) -> None:
        s = self.stats
        s.num_running = len(self.running)
        s.num_waiting = len(self.waiting)
        s.kv_usage = self.pool.usage()
        if self.lora is not None:
            s.lora_running = ",".join(sorted({r.lora for r in self.running if r.lora}))
            s.lora_waiting = ",".join(sorted({r.lora for r in self.waiting if r.lora}))
            s.lora_loads, s.lora_swaps = self.lora.loads, self.lora.swaps

    def _drop_disconnected(self) -> None:
        gone = [r for r in self.running if r.is_disconnected()]
        gone += [r for r in self.waiting if r.is_disconnected()]
        for r in gone:
            self.abort(r)

    # -- scheduling ------------------------------------------------------------------------
    def _hash_blocks(self, req: SimRequest) -> None:
        """Extend `req.block_hashes` to every full block of its tokens (hash chain)."""
        if not self.cfg.enable_prefix_caching:
            return
        bs, tokens, hashes = self.bs, req.tokens, req.block_hashes
        full = len(tokens) // bs
        # vLLM keys cached blocks by adapter too: two adapters never share a prefix block
        parent = hashes[-1] if hashes else (block_hash(None, ("<lora>", req.lora)) if req.lora else None)
        for i in range(len(hashes), full):
            parent = block_hash(parent, tuple(tokens[i * bs : (i + 1) * bs]))
            hashes.append(parent)

    def _preempt(self, req: SimRequest) -> None:
        self.pool.release(req.blocks)
        req.blocks = []
        req.num_computed = 0
        req.num_cached_blocks = 0
        req.status = WAITING
        req.preemptions += 1
        self.stats.num_preemptions += 1
        self.waiting.appendleft(req)

    def _schedule(self) -> tuple[list[tuple[SimRequest, int, int]], int, int, int]:
        cfg, pool, bs = self.cfg, self.pool, self.bs
        budget = cfg.max_num_batched_tokens
        chunked = cfg.enable_chunked_prefill
        items: list[tuple[SimRequest, int, int]] = []
        prefill = decode = context = 0
        running = self.running
        preempted = False
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            n_new = len(req.tokens) - req.num_computed
            decoding = n_new == 1 and req.num_computed >= req.prompt_len
            n_spec = 0
            if decoding and self.spec_k:
                n_spec = max(
                    0,
                    min(
                        self.spec_k,
                        req.max_tokens - len(req.out_ids) - 1,
                        self.max_model_len - len(req.tokens) - 1,
                        budget - 1,
                    ),
                )
            n = n_new + n_spec
            if n > budget:
                if not chunked:
                    i += 1
                    continue
                n = budget
            need = -(-(req.num_computed + n) // bs) - len(req.blocks)
            if need > 0:
                while need > pool.num_free:
                    victim = running.pop()
                    self._preempt(victim)
                    preempted = True
                    if victim is req:
                        break
                if req.status != RUNNING:
                    break  # it preempted itself: it was the newest
                got = pool.allocate(need)
                assert got is not None  # the preemptions above freed `need` blocks
                req.blocks += got
            items.append((req, n, n_spec))
            budget -= n
            if decoding:
                decode += n
            else:
                prefill += n
            context += req.num_computed + n
            i += 1
        self.lora_load_s = 0.0
        if not preempted:
            now = perf_counter()
            waiting = self.waiting
            lora = self.lora
            active = {r.lora for r in running if r.lora} if lora is not None else set()
            skipped: list[SimRequest] = []
            while waiting and len(running) < cfg.max_num_seqs and budget > 0:
                req = waiting[0]
                if lora is not None and req.lora and req.lora not in active and len(active) >= lora.cfg.max_loras:
                    skipped.append(waiting.popleft())  # its adapter has no slot in this batch: later ones may run
                    continue
                hits: list[int] = []
                if cfg.enable_prefix_caching:
                    hits = pool.lookup(req.block_hashes, (len(req.tokens) - 1) // bs)
                num_cached = len(hits) * bs
                n_new = len(req.tokens) - num_cached
                if not chunked and n_new > budget:
                    break
                n = min(n_new, budget)
                need = -(-(num_cached + n) // bs) - len(hits)
                # admission gate: the first chunk's blocks, or (vLLM's reserve-full-isl) the whole sequence's
                gate = -(-len(req.tokens) // bs) - len(hits) if cfg.admit_full_prompt else need
                if gate + pool.num_evictable_needed(hits) > pool.num_free:
                    break
                pool.touch(hits)
                got = pool.allocate(need)
                assert got is not None  # checked against num_free above
                req.blocks = hits + got
                req.num_cached_blocks = len(hits)
                req.num_computed = num_cached
                if cfg.enable_prefix_caching:
                    self.stats.prefix_queries += len(req.tokens)
                    self.stats.prefix_hits += num_cached
                    self.stats.log_queries += len(req.tokens)
                    self.stats.log_hits += num_cached
                if req.cached_tokens < 0:
                    req.cached_tokens = num_cached
                    if req.stream is not None:
                        req.stream.cached_tokens = num_cached
                waiting.popleft()
                if lora is not None and req.lora:
                    self.lora_load_s += lora.activate(req.lora, active)
                    active.add(req.lora)
                req.status = RUNNING
                running.append(req)
                if req.first_sched is None:
                    req.first_sched = now
                items.append((req, n, 0))
                budget -= n
                prefill += n
                context += num_cached + n
            waiting.extendleft(reversed(skipped))
        return items, prefill, decode, context

    # -- applying a step -------------------------------------------------------------------
    def _apply(self, items: list[tuple[SimRequest, int, int]]) -> None:
        now = perf_counter()
        stats, rng, pool = self.stats, self.rng, self.pool
        caching = self.cfg.enable_prefix_caching
        eos_prob = self.cfg.eos_prob
        finished: list[tuple[SimRequest, str]] = []
        for req, n, n_spec in items:
            if req.status != RUNNING:
                continue  # aborted or preempted meanwhile
            accepted = 0
            if n_spec:
                p = self.spec_p
                per_pos = stats.spec_accepted_per_pos
                while accepted < n_spec and rng.random() < p:
                    per_pos[accepted] += 1
                    accepted += 1
                stats.spec_drafts += 1
                stats.spec_draft_tokens += n_spec
                stats.spec_accepted += accepted
                req.num_computed += n - n_spec + accepted
            else:
                req.num_computed += n
            if req.num_computed < len(req.tokens):
                stats.log_prompt_tokens += n
                self._register_blocks(req, caching)
                continue  # chunked prefill in progress
            # sample 1 + accepted tokens
            new_ids: list[int] = []
            reason: str | None = None
            greedy = req.greedy  # temperature 0: tokens from the prompt's hash, whatever the step size
            for _ in range(1 + accepted):
                wid = greedy.token(len(req.out_ids)) if greedy is not None else int(rng.random() * VOCAB_SIZE)
                new_ids.append(wid)
                req.out_ids.append(wid)
                req.tokens.append(VOCAB[wid])
                n_out = len(req.out_ids)
                if n_out >= req.max_tokens or len(req.tokens) >= self.max_model_len:
                    reason = "length"
                    break
                if (
                    not req.ignore_eos
                    and n_out >= req.min_tokens
                    and (greedy.stops_after(n_out - 1, eos_prob) if greedy is not None else rng.random() < eos_prob)
                ):
                    reason = "stop"
                    break
            if req.first_token is None:
                req.first_token = now
                stats.ttft.observe(now - req.arrival)
                stats.prompt_tokens += req.prompt_len
                stats.prompt_tokens_cached += max(0, req.cached_tokens)
                stats.log_prompt_tokens += n
            else:
                last = req.last_token
                assert last is not None  # set with the first token
                stats.itl.observe(now - last)
                if n > 1 + n_spec:  # recompute prefill after a preemption
                    stats.log_prompt_tokens += n
            req.last_token = now
            stats.generation_tokens += len(new_ids)
            stats.log_generation_tokens += len(new_ids)
            if caching:
                self._hash_blocks(req)
                self._register_blocks(req, caching)
            if not self._emit(req, new_ids, reason):
                finished.append((req, "abort"))
            elif reason is not None:
                finished.append((req, reason))
        for req, reason in finished:
            if req.status == FINISHED:
                continue
            with contextlib.suppress(ValueError):
                self.running.remove(req)
            pool.release(req.blocks)
            req.blocks = []
            self._finish(req, reason, now)

    def _register_blocks(self, req: SimRequest, caching: bool) -> None:
        if not caching:
            return
        full = min(req.num_computed // self.bs, len(req.block_hashes), len(req.blocks))
        if full > req.num_cached_blocks:
            pool, blocks, hashes = self.pool, req.blocks, req.block_hashes
            for i in range(req.num_cached_blocks, full):
                pool.cache_block(blocks[i], hashes[i])
            req.num_cached_blocks = full
