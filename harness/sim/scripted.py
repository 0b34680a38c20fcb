"""Scripted mode: every request streams on its own absolute schedule, independent of batching.

Token i (0-based) of a request that arrived at t0 is due at t0 + TTFT + i x ITL; with
`--scripted-jitter-ms J` the TTFT and each gap get an independent uniform offset in [-J, +J]
(clipped at 0), so schedules stay monotonic. A request always produces exactly `max_tokens`.

One ticker serves all streams: a heap of (due_ns, seq, request) and a single `loop.call_at`
timer armed for the earliest due time. When it fires it writes every due event with raw
transport writes and re-arms. Nothing here allocates a task or a future per token.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
import time
from time import perf_counter, perf_counter_ns

from harness.sim.config import SimConfig
from harness.sim.engine_base import VOCAB_SIZE, EngineBase
from harness.sim.metrics import Stats
from harness.sim.request import FINISHED, RUNNING, SimRequest
from harness.sim.sse import WORD_BYTES


class ScriptedEngine(EngineBase):
    def __init__(self, cfg: SimConfig, stats: Stats, rng: random.Random) -> None:
        super().__init__(cfg, stats, rng)
        sc = cfg.scripted
        assert sc is not None
        self.ttft_ns = int(sc.ttft_ms * 1e6)
        self.itl_ns = int(sc.itl_ms * 1e6)
        self.jitter_ns = int(sc.jitter_ms * 1e6)
        self._heap: list[tuple[int, int, SimRequest]] = []
        self._seq = itertools.count()
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = 0
        self._loop: asyncio.AbstractEventLoop  # the running loop, set by start()
        # loop.time() is time.monotonic(); perf_counter_ns is CLOCK_MONOTONIC too, but convert
        # through a measured offset rather than assume it.
        self._offset = time.monotonic() - perf_counter_ns() / 1e9
        faults = cfg.faults
        self._stall_every_ns = int(faults.stall_every_s * 1e9) if faults.stall_ms > 0 else 0
        self._stall_ns = int(faults.stall_ms * 1e6)
        self._next_stall = 0
        self._stall_end = 0  # end of the last injected stall (perf_counter_ns)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._stall_every_ns:
            self._next_stall = perf_counter_ns() + self._stall_every_ns

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _jitter(self) -> int:
        j = self.jitter_ns
        return int((self.rng.random() * 2.0 - 1.0) * j) if j else 0

    def submit(self, req: SimRequest) -> None:
        self._draw_disconnect(req)
        req.status = RUNNING
        req.queued = req.first_sched = req.arrival
        if req.stream is None:  # non-streaming: everything at the last token's due time
            due = req.arrival_ns + max(0, self.ttft_ns + self._jitter()) + (req.max_tokens - 1) * self.itl_ns
        else:
            due = req.arrival_ns + max(0, self.ttft_ns + self._jitter())
        heapq.heappush(self._heap, (due, next(self._seq), req))
        self.stats.num_running += 1
        self._arm()

    def abort(self, req: SimRequest) -> None:
        if req.status != FINISHED:
            self.stats.num_running -= 1
            self._finish(req, "abort")  # its heap entry is skipped when it comes due

    def _arm(self) -> None:
        heap = self._heap
        if not heap:
            return
        due = heap[0][0]
        if self._handle is not None:
            if self._armed_for <= due:
                return
            self._handle.cancel()
        self._armed_for = due
        self._handle = self._loop.call_at(due / 1e9 + self._offset, self._tick)

    def _tick(self) -> None:
        self._handle = None
        heap = self._heap
        now = perf_counter_ns()
        if self._stall_every_ns and now >= self._next_stall:
            # fault: stop writing for stall_ms; events that came due meanwhile go out in a burst
            self._next_stall = now + self._stall_ns + self._stall_every_ns
            self._stall_end = now + self._stall_ns
            self._handle = self._loop.call_at((now + self._stall_ns) / 1e9 + self._offset, self._tick)
            self._armed_for = now + self._stall_ns
            return
        if heap:
            # how late the earliest due event goes out (an injected stall's burst is on schedule)
            self.stats.lag((now - max(heap[0][0], self._stall_end)) / 1e9)
            self.stats.steps += 1
        count = 0
        while heap and heap[0][0] <= now:
            due, seq, req = heap[0]
            nxt = self._step(req, due)
            if nxt is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (nxt, seq, req))
            count += 1
            if count & 31 == 0:
                now = perf_counter_ns()
        self._arm()

    def _step(self, req: SimRequest, due: int) -> int | None:
        """Write `req`'s due event; return its next due time, or None when it is done."""
        if req.status == FINISHED:
            return None
        stats = self.stats
        now = perf_counter()
        if req.stream is None:
            g = req.greedy
            ids = [g.token(i) if g is not None else int(self.rng.random() * VOCAB_SIZE) for i in range(req.max_tokens)]
            req.out_ids.extend(ids)
            req.first_token = now
            stats.ttft.observe(now - req.arrival)
            self._done(req, now)
            return None
        stream = req.stream
        out = req.out_ids
        wid = req.greedy.token(len(out)) if req.greedy is not None else int(self.rng.random() * VOCAB_SIZE)
        out.append(wid)
        n_out = len(out)
        if n_out == 1:
            req.first_token = now
            stats.ttft.observe(now - req.arrival)
            if req.chat:
                stream.role()
        else:
            last = req.last_token
            assert last is not None  # set with the first token
            stats.itl.observe(now - last)
        req.last_token = now
        stats.generation_tokens += 1
        stats.log_generation_tokens += 1
        last = n_out >= req.max_tokens
        if not stream.content(WORD_BYTES[wid], 1, "length" if last else None):
            self.abort(req)  # the client went away
            return None
        if req.disconnect_after is not None and n_out >= req.disconnect_after and not last:
            req.transport.close()  # fault: cut the stream mid-way
            self.abort(req)
            return None
        if last:
            self._done(req, now)
            return None
        gap = self.itl_ns
        if self.jitter_ns:
            gap = max(0, gap + self._jitter())
        return due + gap

    def _done(self, req: SimRequest, now: float) -> None:
        self.stats.num_running -= 1
        self.stats.prompt_tokens += req.prompt_len
        self.stats.log_prompt_tokens += req.prompt_len
        self.stats.generation_tokens += 0 if req.stream is not None else len(req.out_ids)
        self._finish(req, "length", now)
