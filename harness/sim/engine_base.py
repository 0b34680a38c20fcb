"""What the batching engine and the scripted engine share: submission, finishing, aborts."""

from __future__ import annotations

import random
from collections.abc import Callable
from time import perf_counter

from harness.sim.config import SimConfig
from harness.sim.metrics import Stats
from harness.sim.request import FINISHED, SimRequest
from harness.sim.sse import WORD_BYTES, request_metrics_json

VOCAB_SIZE = len(WORD_BYTES)


class EngineBase:
    def __init__(self, cfg: SimConfig, stats: Stats, rng: random.Random) -> None:
        self.cfg = cfg
        self.stats = stats
        self.rng = rng
        self.finished_count = 0
        self.dead = False  # set when the engine loop died: /health answers 503, as vLLM's EngineDeadError
        #: called with the count of finished requests after each finish (crash-after-requests fault)
        self.on_finished: Callable[[int], None] | None = None

    # -- interface -------------------------------------------------------------------------
    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def submit(self, req: SimRequest) -> None:
        raise NotImplementedError

    def abort(self, req: SimRequest) -> None:
        raise NotImplementedError

    def reset_prefix_cache(self) -> bool:
        return True

    # -- shared ----------------------------------------------------------------------------
    def _emit(self, req: SimRequest, ids: list[int], finish: str | None) -> bool:
        """Send freshly generated tokens `ids` of a streaming request; False if the client is gone."""
        stream = req.stream
        if stream is None:
            return True
        if req.chat and len(req.out_ids) == len(ids):  # first output: vLLM sends the role chunk with it
            stream.role()
        text = WORD_BYTES[ids[0]] if len(ids) == 1 else b"".join([WORD_BYTES[i] for i in ids])
        ok = stream.content(text, len(ids), finish)
        if ok and req.disconnect_after is not None and len(req.out_ids) >= req.disconnect_after and finish is None:
            # fault: drop the connection mid-stream (what is already written is still delivered)
            req.transport.close()
            return False
        return ok

    def _finish(self, req: SimRequest, reason: str, now: float | None = None) -> None:
        if req.status == FINISHED:
            return
        if now is None:
            now = perf_counter()
        req.status = FINISHED
        req.finish_reason = reason
        if req.stream is not None and reason != "abort":
            req.stream.finish(request_metrics_json(req) if self.cfg.per_request_metrics else None)
        self.stats.finish(
            reason,
            req.arrival,
            req.first_sched,
            req.first_token,
            now,
            req.prompt_len,
            len(req.out_ids),
            req.max_tokens,
            req.preemptions,
        )
        if not req.done.done():
            req.done.set_result(None)
        self.finished_count += 1
        if self.on_finished is not None:
            self.on_finished(self.finished_count)

    def _draw_disconnect(self, req: SimRequest) -> None:
        rate = self.cfg.faults.disconnect_rate
        if rate and req.stream is not None and self.rng.random() < rate:
            req.disconnect_after = self.rng.randint(1, max(1, req.max_tokens - 1))
