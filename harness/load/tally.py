"""The load controller's tally part: counts of what was recorded, and the client's own CPU.

The controller owns the phases and the hand-out (what was sent, what is in flight, the window);
this part owns what the finished requests added up to (completed, failed, output tokens, the
server's prompt tokens against the intended ones, read clocks, back-offs) and samples the load
process's CPU share for the progress line. The controller lays both out in the progress line
(progress.jsonl, the live view) and the process's result, from which the orchestrator builds
summary.json (harness.run.finish). Nothing here reads the controller.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any

from harness.client import http_stream
from harness.metrics.prompt_fit import PromptFit
from harness.metrics.record import RequestRecord

#: a client-CPU interval shorter than this is start-up or shut-down work, not the load
MIN_CPU_INTERVAL_S = 0.5


class Tally:
    """Counters of recorded requests and the client-CPU samples of one load process."""

    def __init__(self) -> None:
        self.done = 0
        self.failed = 0
        self.output_tokens = 0
        self.coalesced_reads = 0
        self.reads_clock: dict[str, int] = {}
        #: server prompt_tokens - intended, as running figures (a list of them grew by one per request)
        self.usage_checked = 0
        self.usage_diff_sum = 0
        self.usage_diff_max: int | None = None
        self.usage_fit = PromptFit()  # server prompt tokens vs intended: offset, scale, scatter
        self.output_disagreements = 0
        self.backoffs = 0
        self.backoff_s = 0.0
        self.cpu_samples: list[float] = []
        self.finish_backlog_max = 0  # set by the Finisher (harness.load.user)
        self.cpu_at_window: os.times_result | None = None  # process CPU times when the window opened
        self._last_cpu = (time.process_time(), time.perf_counter())

    # ------------------------------------------------------------------ counting
    def read_clock(self, rec: RequestRecord) -> None:
        """Every finished request (warmup too): which clock stamped its reads."""
        self.reads_clock[rec.clock] = self.reads_clock.get(rec.clock, 0) + 1

    def measured(self, rec: RequestRecord) -> None:
        """A measured request was recorded."""
        if rec.ok:
            self.done += 1
            self.output_tokens += rec.output_tokens or 0
            if rec.input_tokens is not None:
                diff = rec.input_tokens - rec.intended_input_tokens
                self.usage_checked += 1
                self.usage_diff_sum += diff
                if self.usage_diff_max is None or abs(diff) > self.usage_diff_max:
                    self.usage_diff_max = abs(diff)
                self.usage_fit.add(rec.intended_input_tokens, rec.input_tokens)
            if (
                rec.tokenizer_output_tokens is not None
                and rec.output_tokens is not None
                and rec.output_source != "tokenizer"
            ):
                self.output_disagreements += rec.tokenizer_output_tokens != rec.output_tokens
        else:
            self.failed += 1
        self.coalesced_reads += rec.coalesced_reads

    def note_backoff(self, delay_s: float) -> None:
        """A closed-loop user waits `delay_s` after a refused or failed request (load.backoff)."""
        self.backoffs += 1
        self.backoff_s += delay_s

    # ------------------------------------------------------------------ client CPU
    def window_opened(self) -> None:
        """Client CPU is judged over the window only: start a fresh interval here."""
        self._last_cpu = (time.process_time(), time.perf_counter())
        self.cpu_at_window = os.times()  # user and system CPU seconds when the window opened

    def sample_cpu(self, measuring: bool) -> float:
        """The process's CPU share (percent) since the last sample; kept for the result when
        `measuring` (the window or its drain) and the interval was long enough."""
        now_cpu = (time.process_time(), time.perf_counter())
        wall = now_cpu[1] - self._last_cpu[1]
        cpu_pct = 100.0 * (now_cpu[0] - self._last_cpu[0]) / max(wall, 1e-9)
        self._last_cpu = now_cpu
        # a very short interval (the call right after start, the last one after the stop) is
        # mostly start-up or shut-down work, not the load: it would read as a saturated client
        if measuring and wall >= MIN_CPU_INTERVAL_S:
            self.cpu_samples.append(cpu_pct)
        return cpu_pct

    def _window_cpu(self) -> dict[str, float | None]:
        if self.cpu_at_window is None:
            return {"cpu_s": None, "cpu_sys_s": None}
        now, then = os.times(), self.cpu_at_window
        sys_s = now.system - then.system
        return {"cpu_s": round(now.user - then.user + sys_s, 3), "cpu_sys_s": round(sys_s, 3)}

    # ------------------------------------------------------------------ the result's blocks
    def backoff_block(self) -> dict[str, Any]:
        return {"backoffs": self.backoffs, "backoff_s": round(self.backoff_s, 3)}

    def timing(self) -> dict[str, Any]:
        return {"clock_by_request": self.reads_clock, "coalesced_reads": self.coalesced_reads}

    def usage_check(self, tokenizer_id: str) -> dict[str, Any]:
        return {
            "requests_with_usage": self.usage_checked,
            "prompt_tokens_mean_diff": (self.usage_diff_sum / self.usage_checked) if self.usage_checked else None,
            "max_diff": self.usage_diff_max,
            "fit": self.usage_fit.to_dict(),  # merged exactly by harness.results.build
            "output_tokenizer_disagreements": self.output_disagreements,
            "tokenizer": tokenizer_id,
        }

    def client(self) -> dict[str, Any]:
        cpu = self.cpu_samples
        return {
            "cpu_max_pct": max(cpu) if cpu else None,
            "cpu_mean_pct": (sum(cpu) / len(cpu)) if cpu else None,
            "reader": http_stream.READER,  # native (C) or python: which reader read the streams
            # the process's peak RSS (Linux reports KiB): flat in the number of requests
            "rss_peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            # most finished responses waiting to be interpreted at once (harness.load.user.Finisher)
            "finish_backlog_max": self.finish_backlog_max,
            # CPU seconds from the window's start to this result (its requests read, decoded,
            # recorded): with output tokens, the client's CPU per token; of it, in the kernel
            # (system calls: reads, sends, epoll)
            **self._window_cpu(),
        }
