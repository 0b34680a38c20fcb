"""The controller's reporting half (mixed into harness.load.controller.LoadController): the
progress line every interval (progress.jsonl, the live view) and the process's result, from which
the orchestrator builds summary.json (harness.run.finish). Reads the controller's counters; changes
none of them except the client-CPU interval it samples.
"""

from __future__ import annotations

import json
import os
import resource
import time
from typing import Any

from harness.client import http_stream
from harness.client.http_stream import perf_ns
from harness.load.phases import DRAIN, MEASURE

#: a client-CPU interval shorter than this is start-up or shut-down work, not the load
MIN_CPU_INTERVAL_S = 0.5


class Tally:
    """in_flight_sent/shown_phase/progress/result; `self` is the LoadController."""

    phase: str
    scenario: Any
    plan: Any

    @property
    def in_flight_sent(self) -> int:
        """Requests on the wire: open loop hands arrivals out ahead of their intended times, and
        those still waiting to be sent are not in flight (audit D9: "in-flight 142" at 5 s)."""
        return max(0, self.in_flight - self.scheduled - max(0, self._warm_unsent))

    def shown_phase(self) -> str:
        """The phase as a person should read it: open loop enters DRAIN as soon as the last
        arrival inside the window has been handed out, but the window lasts until its end."""
        if self.phase == DRAIN and self.window_end_ns is not None and perf_ns() < self.window_end_ns:
            return MEASURE
        return self.phase

    def progress(self) -> dict[str, Any]:
        now_cpu = (time.process_time(), time.perf_counter())
        wall = now_cpu[1] - self._last_cpu[1]
        cpu_pct = 100.0 * (now_cpu[0] - self._last_cpu[0]) / max(wall, 1e-9)
        self._last_cpu = now_cpu
        # a very short interval (the call right after start, the last one after the stop) is
        # mostly start-up or shut-down work, not the load: it would read as a saturated client
        if self.phase in (MEASURE, DRAIN) and wall >= MIN_CPU_INTERVAL_S:
            self.cpu_samples.append(cpu_pct)
        now = perf_ns()
        elapsed = (now - self.window_start_ns) / 1e9 if self.window_start_ns else 0.0
        load = self.scenario.load
        line = {
            "t": time.time(),
            "phase": self.shown_phase(),
            "worker": self.plan.worker,
            "elapsed_s": round(elapsed, 3),
            "duration_s": load.duration_s,
            "requests_target": load.requests,
            "sent": self.sent - self.scheduled,
            "done": self.done,
            "failed": self.failed,
            "in_flight": self.in_flight_sent,
            "scheduled": self.scheduled,
            "output_tokens": self.output_tokens,
            "warmup_done": self.warm_done,
            "cpu_pct": round(cpu_pct, 1),
        }
        self.progress_file.write(json.dumps(line) + "\n")
        self.requests_file.flush()
        self.check_files()
        return line

    def _window_cpu(self) -> dict[str, float | None]:
        if self.cpu_at_window is None:
            return {"cpu_s": None, "cpu_sys_s": None}
        now, then = os.times(), self.cpu_at_window
        sys_s = now.system - then.system
        return {"cpu_s": round(now.user - then.user + sys_s, 3), "cpu_sys_s": round(sys_s, 3)}

    def result(self) -> dict[str, Any]:
        """Everything the orchestrator needs to build summary.json for this process."""
        start = self.window_start_ns
        end_candidates = [t for t in (self.window_end_ns, self.last_done_ns) if t is not None]
        end = max(end_candidates) if end_candidates else start
        duration = (end - start) / 1e9 if start is not None and end is not None else 0.0
        cpu = self.cpu_samples
        self._cut_open_sessions()
        return {
            "worker": self.plan.worker,
            "metrics": self.metrics.to_dict(),
            "window": {
                "start": self.window_start_wall,
                "end": (self.window_start_wall or 0) + duration if self.window_start_wall else None,
                "duration_s": duration,
                "warmup_s": (start - self.started_ns) / 1e9 if start else 0.0,
                "warmup_requests": self.warm_done,
                # from the stop condition (duration or count) to the last completion: the window
                # includes it because every request handed out inside it is measured to the end
                "drain_s": max(0.0, (end - self.window_end_ns) / 1e9) if end is not None and self.window_end_ns else 0.0,
            },
            "sent": self.sent,
            "cut_at_end": self.cut_at_end,
            "abort_reason": self.failures.abort_reason,
            "backoffs": self.backoffs,
            "backoff_s": round(self.backoff_s, 3),
            "error_lines_suppressed": dict(self.failures.suppressed),
            "timing": {
                "clock_by_request": self.reads_clock,
                "coalesced_reads": self.coalesced_reads,
            },
            "usage_check": {
                "requests_with_usage": self.usage_checked,
                "prompt_tokens_mean_diff": (self.usage_diff_sum / self.usage_checked) if self.usage_checked else None,
                "max_diff": self.usage_diff_max,
                "fit": self.usage_fit.to_dict(),  # merged exactly by harness.results.build
                "output_tokenizer_disagreements": self.output_disagreements,
                "tokenizer": self.tokenizer.id,
            },
            "client": {
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
            },
            **self._fleet_result(),
        }
