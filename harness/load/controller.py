"""The per-process run controller: phases, request hand-out, recording, progress.

Locust users ask `next_item()` for work and hand back `finish(record)`. Phases:
warmup -> measure -> drain -> done. The measured window starts when the first measured request
is handed out and ends when the stop condition is met (duration or request count); requests
handed out inside the window are measured to completion (drain), so the window's wall time is
extended to the last completion. Nothing here imports gevent: the caller supplies the clock
and sleeps, which keeps the controller testable without Locust.

Its other jobs are parts it holds, each in its own module with a narrow interface: `fleet`
(several endpoints, routing, adapters: harness.load.fleet), `sessions` (multi-turn sessions:
harness.load.sessions), `agents` (agentic sessions' fan-out and accounting: harness.load.agents)
and `tally` (counts of what was recorded, the client's CPU: harness.load.tally). The session and
agent parts ask the controller whether a turn may go out and to count it (the `TurnGate`
protocol: `turn_allowed`, `hand_out`); the controller lays the tally's counts out in the progress
line and the result.
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.client.adapters.base import Prompt, get_adapter
from harness.client.http_stream import perf_ns
from harness.client.request import (
    RequestSpec,
    base_headers,
    build_payload,
    sampling_fields,
)
from harness.load.agents import Agents
from harness.load.deadlines import request_timeout_s
from harness.load.failures import FailureWatch
from harness.load.fleet import Fleet
from harness.load.linefile import LineFile
from harness.load.phases import DONE, DRAIN, MEASURE, WARMUP
from harness.load.plan import LoadPlan
from harness.load.sessions import Sessions
from harness.load.tally import Tally
from harness.metrics.record import RequestRecord
from harness.metrics.recorder import ALL, MetricSet
from harness.scenario.models import Scenario
from harness.workload.generator import PlannedRequest, WorkloadGenerator
from harness.workload.schedule import arrival_offsets, worker_share
from harness.workload.sessions import Conversation
from harness.workload.tokenizers import load_tokenizer

#: requests.jsonl lines: one encoder for the run (json.dumps with separators builds one per call)
_encode_line = json.JSONEncoder(separators=(",", ":")).encode

__all__ = ["DONE", "DRAIN", "MEASURE", "WARMUP", "Item", "LoadController", "Pause"]


class Item:
    __slots__ = ("endpoint", "intended_ns", "payload", "planned", "request_id")

    def __init__(self, planned: PlannedRequest, payload: bytes, intended_ns: int | None, request_id: str) -> None:
        self.planned = planned
        self.payload = payload
        self.intended_ns = intended_ns
        self.request_id = request_id
        self.endpoint = 0  # index into the fleet's endpoints, set by Fleet.route()


class Pause:
    """Not work: the user should sleep until `until_ns` and ask again.

    Open loop only: the warmup schedule has been handed out but its last arrivals have not been
    sent yet, so the measured window must not open (warmup strictly before the window)."""

    __slots__ = ("until_ns",)

    def __init__(self, until_ns: int) -> None:
        self.until_ns = until_ns


#: how long a user waits between checks while warmup requests handed out are still unsent
PAUSE_POLL_NS = 2_000_000
#: requests built ahead hold at most this much payload (1,024 long-context prompts would not fit)
PREFETCH_MAX_BYTES = 64 << 20
#: offline: how long a user waits between checks for the warmup to drain
OFFLINE_POLL_NS = 50_000_000


class LoadController:
    def __init__(self, plan: LoadPlan, emit: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.plan = plan
        self.scenario = Scenario.model_validate(plan.scenario)
        self.stage: str | None = plan.stage  # LoadTestShape stage (a worker's Stage message moves it on)
        sc = self.scenario
        self.tokenizer = load_tokenizer(sc.workload.tokenizer, Path(plan.scenario_dir))
        self.count_tokens = self.tokenizer.count
        self.generator = WorkloadGenerator(sc, self.tokenizer, Path(plan.scenario_dir))
        api_key = os.environ.get(plan.api_key_env) if plan.api_key_env else None
        stream_options: dict[str, Any] = {"include_usage": True}
        if plan.continuous_usage:
            stream_options["continuous_usage_stats"] = True
        sampling = sampling_fields(sc.sampling)
        self.spec = RequestSpec(
            adapter=get_adapter(sc.target.api),
            model=plan.model,
            sampling=sampling,
            stream_options=stream_options,
            headers=base_headers(api_key, sc.target.headers),
            timeout_s=request_timeout_s(sc),
        )
        slos = {c.name: sc.slo_for(c.name).model_dump() for c in sc.workload.classes}
        slos[ALL] = sc.slo.model_dump()
        self.metrics = MetricSet(slos)
        self.emit = emit or (lambda _line: None)
        out = Path(plan.out_dir)
        suffix = f".w{plan.worker}" if plan.workers > 1 else ""
        self.requests_path = out / f"requests{suffix}.jsonl"
        # LineFile: a full disk ends the file on a whole line and stops the load (write_failed)
        self.requests_file: Any = LineFile(self.requests_path, 1 << 16)
        self.progress_path = out / f"progress{suffix}.jsonl"
        self.progress_file: Any = LineFile(self.progress_path, 1)
        self.write_error: str | None = None  # why a file of this run could not be written
        # ---- state
        self.phase = WARMUP
        self.open_loop = sc.load.open_loop
        self.started_ns = 0
        self.window_start_ns: int | None = None
        self.window_start_wall: float | None = None
        self.window_end_ns: int | None = None  # when the stop condition was met
        self._last_intended_ns: int | None = None  # open loop: the latest send time handed out
        self.last_done_ns: int | None = None
        self.warm_sent = 0
        self.sent = 0
        self.in_flight = 0
        self.done = 0
        self.failed = 0
        self.warm_done = 0
        self.cut_at_end = 0
        self.failures = FailureWatch()
        self._schedule: Iterator[tuple[int, float]] | None = None
        self._prefetched: deque[tuple[int, float | None, Item]] = deque()
        self._prefetched_bytes = 0  # their payloads: what building ahead holds in memory
        self._warm_schedule: Iterator[tuple[int, float]] | None = None
        self._warm_peek: tuple[int, float] | None = None
        self._warm_unsent = 0  # open-loop warmup items handed out whose send has not started
        self._warm_window_ns: int | None = None  # open loop: the window opens at the warmup schedule's end
        self.scheduled = 0  # open loop: measured requests handed out ahead of their send time, not yet sent
        self._closed_index = plan.worker
        self._warm_index = plan.worker
        self.on_done: Callable[[], None] = lambda: None
        # ---- parts
        self.tally = Tally()  # counts of what was recorded, client CPU
        # several endpoints (one without a fleet), a routing policy, prefix overlap
        self.fleet = Fleet(list(sc.target.endpoints or [plan.target_url]), sc.target.routing, self.tokenizer)
        self.agents = Agents(self, self.metrics.sessions, end_session=lambda conv: self.sessions.session_over(conv))
        self.sessions = Sessions(self, self.metrics.sessions, self.count_tokens, self.agents)

    # ------------------------------------------------------------------ phases
    def start(self) -> None:
        self.started_ns = perf_ns()
        w = self.scenario.warmup
        if w.duration_s <= 0 and w.requests <= 0:
            self._begin_measure()
        else:
            self.emit({"event": "warmup_start", "t": time.time()})

    def _begin_measure(self) -> None:
        self.phase = MEASURE
        self.window_start_ns = perf_ns()
        self.window_start_wall = time.time()
        self.tally.window_opened()  # client CPU is judged over the window only
        self.emit({"event": "window_start", "t": self.window_start_wall})

    def _end_window(self, not_before_ns: int | None = None) -> None:
        if self.phase == MEASURE:
            self.phase = DRAIN
            now = perf_ns()
            self.window_end_ns = max(now, not_before_ns) if not_before_ns is not None else now
            self.emit({"event": "window_end", "t": time.time()})
        self._maybe_done()

    def _maybe_done(self) -> None:
        if self.phase == DRAIN and self.in_flight == 0:
            self.phase = DONE
            self.emit({"event": "drained", "t": time.time()})
            self.on_done()

    def tick(self) -> None:
        """Close the window when its duration is over, even if no user is free to ask for work
        (every user inside a stalled or endless request would otherwise hold the window open)."""
        load = self.scenario.load
        if (
            self.phase == MEASURE
            and load.duration_s is not None
            and self.window_start_ns is not None
            and perf_ns() - self.window_start_ns >= load.duration_s * 1e9
        ):
            self._prefetched.clear()
            self._prefetched_bytes = 0
            end = self.window_start_ns + round(load.duration_s * 1e9)
            self._end_window(end if self.open_loop else None)

    def stop(self) -> None:
        """Stop handing out work (Ctrl-C, SIGTERM, or a runner stop)."""
        if self.phase == DRAIN and self.window_end_ns is not None and self.window_end_ns > perf_ns():
            # open loop handed out requests ahead of their send times: the window ends now, and
            # users still waiting for a send time give theirs back (unsend)
            self.window_end_ns = perf_ns()
        if self.phase in (WARMUP, MEASURE):
            if self.phase == WARMUP:
                self.phase = MEASURE  # nothing measured yet; the window is empty
                self.window_start_ns = self.window_start_ns or perf_ns()
                self.window_start_wall = self.window_start_wall or time.time()
            self._end_window()

    # ------------------------------------------------------------------ hand-out
    def next_item(self) -> Item | Pause | None:
        """The next request for a user, a Pause (open loop: wait, then ask again), or None when
        the user should stop."""
        now = perf_ns()
        if self.phase == WARMUP:
            item = self._next_warmup(now)
            if item is not None:
                return item
            if self.open_loop:
                # warmup arrivals are handed out ahead of their intended times: the window opens
                # only when the warmup schedule has ended and every warmup request has been sent,
                # so the engine never sees the warmup and the measured schedules at once
                due = self._warm_window_due_ns()
                if now < due:
                    return Pause(due)
                if self._warm_unsent > 0:
                    return Pause(now + PAUSE_POLL_NS)
            elif self.scenario.load.offline and self.warm_done < self.warm_sent:
                # offline: the N measured requests go out together once the warmup has drained,
                # so the makespan is the engine's time for exactly those N (no warmup overlap);
                # a long poll: thousands of waiting users spinning on a short one starve the reads
                return Pause(now + OFFLINE_POLL_NS)
            self._begin_measure()
            now = perf_ns()
        if self.phase != MEASURE:
            return None
        load = self.scenario.load
        assert self.window_start_ns is not None
        if load.requests is not None and self.sent >= self._my_request_quota():
            # open loop hands its arrivals out ahead of their send times: the window lasts until
            # the last one is due, and the drain runs from that send to the last completion
            # (audit N4: "29.0 s (incl. 28.8 s drain)" of a 20.7-s schedule, "draining" at 1.1 s)
            self._end_window(self._last_intended_ns if self.open_loop else None)
            return None
        if load.duration_s is not None and now - self.window_start_ns >= load.duration_s * 1e9:
            self._end_window()
            return None
        if self._prefetched:
            index, offset, item = self._prefetched.popleft()
            self._prefetched_bytes -= len(item.payload)
        else:
            index, offset = self._next_index()
            item = None
        if offset is not None and load.duration_s is not None and offset >= load.duration_s:
            self._prefetched.clear()
            self._prefetched_bytes = 0
            # open loop hands arrivals out ahead of time: the window still lasts duration_s
            # (else throughput = requests / time to the last completion reads high at low rates)
            self._end_window(self.window_start_ns + round(load.duration_s * 1e9))
            return None
        if item is None:
            item = self._item(self.generator.request(index), None)
        if offset is not None:
            item.intended_ns = self.window_start_ns + round(offset * 1e9)
            self._last_intended_ns = max(self._last_intended_ns or 0, item.intended_ns)
            self.scheduled += 1
        self.sent += 1
        self.in_flight += 1
        return item

    def _next_index(self) -> tuple[int, float | None]:
        """The next measured request index of this worker (and its arrival offset in open loop)."""
        if self.open_loop:
            if self._schedule is None:  # offsets from the window's start: built before it opens too (prefetch)
                self._schedule = worker_share(
                    arrival_offsets(self.scenario.load, self.scenario.seed, Path(self.plan.scenario_dir)),
                    self.plan.worker,
                    self.plan.workers,
                )
            return next(self._schedule)
        index = self._closed_index
        self._closed_index += self.plan.workers
        return index, None

    def prefetch(self, limit: int, batch: int = 4, max_bytes: int = PREFETCH_MAX_BYTES) -> int:
        """Build up to `batch` upcoming requests ahead of time (prompt text, JSON body).

        Called when the event loop is idle, so a wave of simultaneous completions in closed
        loop does not spend milliseconds generating prompts while streams wait to be read. Open
        loop also builds during the warmup: when the window opens every free user takes an
        arrival at once, and building those prompts then (160 of them at 16 req/s) held the event
        loop so long that a real vLLM trial's first six requests went out 45-153 ms late, its TTFT
        p99 307 ms against 33 ms at the median.
        """
        if self.phase != MEASURE and not (self.phase == WARMUP and self.open_loop):
            return 0
        made = 0
        load = self.scenario.load
        quota = self._my_request_quota() if load.requests is not None else None
        while made < batch and len(self._prefetched) < limit and self._prefetched_bytes < max_bytes:
            if quota is not None and self.sent + len(self._prefetched) >= quota:
                break
            last = self._prefetched[-1][1] if self._prefetched else None
            if last is not None and load.duration_s is not None and last >= load.duration_s:
                break  # the schedule has passed the window's end: nothing after it is sent
            index, offset = self._next_index()
            item = self._item(self.generator.request(index), None)
            self._prefetched.append((index, offset, item))
            self._prefetched_bytes += len(item.payload)
            made += 1
        return made

    def _my_request_quota(self) -> int:
        total = self.scenario.load.requests or 0
        w, n = self.plan.worker, self.plan.workers
        return total // n + (1 if w < total % n else 0)

    def _next_warmup(self, now: int) -> Item | None:
        w = self.scenario.warmup
        quota = w.requests // self.plan.workers + (1 if self.plan.worker < w.requests % self.plan.workers else 0)
        if w.requests > 0 and self.warm_sent >= quota:
            return None
        if w.duration_s > 0 and now - self.started_ns >= w.duration_s * 1e9:
            return None
        if self.open_loop:
            if self._warm_schedule is None:
                self._warm_schedule = worker_share(
                    arrival_offsets(self.scenario.load, self.scenario.seed + 7919, Path(self.plan.scenario_dir)),
                    self.plan.worker,
                    self.plan.workers,
                )
            index, offset = self._warm_peek or next(self._warm_schedule)
            self._warm_peek = None
            if w.duration_s > 0 and offset >= w.duration_s:
                self._warm_peek = (index, offset)  # not sent: asked again, still past the end
                return None
            intended: int | None = self.started_ns + round(offset * 1e9)
            self._warm_unsent += 1
        else:
            index = self._warm_index
            self._warm_index += self.plan.workers
            intended = None
        self.warm_sent += 1
        self.in_flight += 1
        return self._item(self.generator.request(index, warmup=True), intended)

    def _warm_window_due_ns(self) -> int:
        """Open loop: when the warmup schedule ends, the same instant for every worker.

        By duration: `started + duration_s`. By request count: the intended time of the first
        arrival after the last warmup one in the global (all-worker) warmup schedule, so the
        measured schedule follows the warmup one as one continuous arrival process."""
        if self._warm_window_ns is None:
            w = self.scenario.warmup
            end_s = float("inf")
            if w.duration_s > 0:
                end_s = w.duration_s
            if w.requests > 0:
                offsets = arrival_offsets(self.scenario.load, self.scenario.seed + 7919, Path(self.plan.scenario_dir))
                for i, offset in enumerate(offsets):
                    if i == w.requests or offset >= end_s:
                        end_s = min(end_s, offset)
                        break
            self._warm_window_ns = self.started_ns + round(end_s * 1e9)
        return self._warm_window_ns

    def _item(self, planned: PlannedRequest, intended: int | None) -> Item:
        prompt = Prompt(planned.prefix, planned.text, planned.output_tokens, planned.messages)
        turn = f".{planned.turn}" if planned.turn else ""
        agent = getattr(planned.session, "agent_id", None)  # a sub-agent: its own name (siblings share turns)
        turn += f"a{agent}" if agent else ""
        rid = f"{'w' if planned.warmup else 'm'}{planned.index}{turn}-{os.getpid()}"
        return Item(planned, build_payload(self.spec, prompt, planned.adapter), intended, rid)

    def turn_allowed(self, warm: bool, intended: int | None) -> bool:
        """Whether a session's next request may still go out: inside the warmup (its quota and
        duration) or inside the measured window (its quota and duration; open loop, an intended
        time before the window's end). The session and agent parts' TurnGate."""
        now = perf_ns()
        when = intended if intended is not None else now
        load = self.scenario.load
        if warm:
            w = self.scenario.warmup
            quota = w.requests // self.plan.workers + (1 if self.plan.worker < w.requests % self.plan.workers else 0)
            ok = self.phase == WARMUP and not (w.requests > 0 and self.warm_sent >= quota)
            if ok and w.duration_s > 0:
                ok = when - self.started_ns < w.duration_s * 1e9
            if ok and intended is not None:
                ok = intended < self._warm_window_due_ns()
            return ok
        ok = self.phase == MEASURE or (
            self.phase == DRAIN and self.open_loop and self.window_end_ns is not None and when < self.window_end_ns
        )
        if ok and load.requests is not None and self.sent >= self._my_request_quota():
            ok = False
            if not self.open_loop:
                self._end_window()
        if (
            ok
            and load.duration_s is not None
            and self.window_start_ns is not None
            and when - self.window_start_ns >= load.duration_s * 1e9
        ):
            ok = False
        return ok

    def hand_out(self, conv: Conversation, intended: int | None, warm: bool) -> Item:
        """The conversation's next request, counted as handed out (in flight, sent, scheduled)."""
        nxt = self._item(self.generator.session_turn(conv), intended)
        self.in_flight += 1
        if warm:
            self.warm_sent += 1
            self._warm_unsent += intended is not None
        else:
            self.sent += 1
            self.scheduled += intended is not None
        return nxt

    def unsend(self, item: Item) -> None:
        """A handed-out request that will not be sent (the run stopped before its send time)."""
        self.in_flight -= 1
        self.fleet.release(item)
        if item.planned.warmup:
            self.warm_sent -= 1
            self._warm_unsent -= item.intended_ns is not None
        else:
            self.sent -= 1
            self.scheduled -= item.intended_ns is not None
        if item.planned.session is not None and item.planned.turn > 1:
            self.sessions.session_over(item.planned.session)
        self._maybe_done()

    # ------------------------------------------------------------------ results
    def new_record(self, item: Item) -> RequestRecord:
        """Called by the user right before the request is sent."""
        p = item.planned
        if item.intended_ns is not None:
            if p.warmup:
                self._warm_unsent -= 1
            else:
                self.scheduled -= 1
        rec = RequestRecord(
            index=p.index,
            class_name=p.class_name,
            request_id=item.request_id,
            intended_ns=item.intended_ns,
            intended_input_tokens=p.input_tokens,
            warmup=p.warmup,
            ideal_cached_tokens=p.ideal_cached,  # a block trace's record (a session's turn: set when recorded)
        )
        stage = (("stage", self.stage),) if self.stage is not None else ()  # LoadTestShape: the stage it was sent in
        rec.labels = self.sessions.labels(rec, item) + stage + self.fleet.labels(item)
        return rec

    def finish(self, rec: RequestRecord) -> bool:
        """Record a finished request; returns whether it met its SLO (False for warmup)."""
        self.in_flight -= 1
        self.tally.read_clock(rec)
        good = False
        conv = self.sessions.before_record(rec)
        if rec.warmup:
            self.warm_done += 1
        else:
            good = self.metrics.record(rec)
            self.last_done_ns = perf_ns()
            self.tally.measured(rec)
            if self.failures.keep_line(rec):
                line = rec.to_json()
                if self.requests_file.write(_encode_line(line) + "\n") is False:
                    self.check_files()
        if conv is not None:
            self.sessions.after_record(rec, conv)
        self.fleet.recorded(rec)
        reason = self.failures.observe(rec)
        if reason is not None:
            self.emit({"event": "abort", "reason": reason, "t": time.time()})
            self.stop()
        self._maybe_done()
        return good

    def check_files(self) -> None:
        """A file that could not be written (a full disk): say so once, and stop the load, since
        what it would measure could not be recorded."""
        if self.write_error is not None:
            return
        for f in (self.requests_file, self.progress_file):
            err = getattr(f, "error", None)
            if err is None:
                continue
            what = "disk full" if err.errno == errno.ENOSPC else "cannot write the results"
            self.write_error = (
                f"{what}: {f.path.name} in {f.path.parent}: {err.strerror or err}; the load stopped, "
                "the complete lines written before are kept"
            )
            self.emit({"event": "abort", "kind": "write_error", "reason": self.write_error, "t": time.time()})
            self.stop()
            return

    def close(self) -> None:
        for f in (self.requests_file, self.progress_file):
            try:
                f.flush()
                f.close()
            except (OSError, ValueError):
                pass

    # ------------------------------------------------------------------ progress and result
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
        """The progress line (progress.jsonl, the orchestrator's live view); samples client CPU."""
        cpu_pct = self.tally.sample_cpu(self.phase in (MEASURE, DRAIN))
        now = perf_ns()
        elapsed = (now - self.window_start_ns) / 1e9 if self.window_start_ns else 0.0
        load = self.scenario.load
        tally = self.tally
        line = {
            "t": time.time(),
            "phase": self.shown_phase(),
            "worker": self.plan.worker,
            "elapsed_s": round(elapsed, 3),
            "duration_s": load.duration_s,
            "requests_target": load.requests,
            "sent": self.sent - self.scheduled,
            "done": tally.done,
            "failed": tally.failed,
            "in_flight": self.in_flight_sent,
            "scheduled": self.scheduled,
            "output_tokens": tally.output_tokens,
            "warmup_done": self.warm_done,
            "cpu_pct": round(cpu_pct, 1),
        }
        self.progress_file.write(json.dumps(line) + "\n")
        self.requests_file.flush()
        self.check_files()
        return line

    def result(self) -> dict[str, Any]:
        """Everything the orchestrator needs to build summary.json for this process."""
        start = self.window_start_ns
        end_candidates = [t for t in (self.window_end_ns, self.last_done_ns) if t is not None]
        end = max(end_candidates) if end_candidates else start
        duration = (end - start) / 1e9 if start is not None and end is not None else 0.0
        self.sessions.cut_open()
        tally = self.tally
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
                "drain_s": max(0.0, (end - self.window_end_ns) / 1e9)
                if end is not None and self.window_end_ns
                else 0.0,
            },
            "sent": self.sent,
            "cut_at_end": self.cut_at_end,
            "abort_reason": self.failures.abort_reason,
            **tally.backoff_block(),
            "error_lines_suppressed": dict(self.failures.suppressed),
            "timing": tally.timing(),
            "usage_check": tally.usage_check(self.tokenizer.id),
            "client": tally.client(),
            **self.fleet.result(),
        }
