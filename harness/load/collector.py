"""The master half of distributed load: hands out the workers' shares, gathers their deltas and
final results (typed messages: harness.load.messages), writes the run directory's files.

Used by the headless master (harness.load.distributed) and the web UI's session (harness.ui).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from locust.env import Environment
from locust.runners import STATE_MISSING, MasterRunner

from harness.load.messages import Delta, Final, Plan, Stage, Stop
from harness.load.plan import LoadPlan
from harness.metrics.recorder import MetricSet

log = logging.getLogger("harness.distributed")

#: after the workers were told to stop: how long beyond their drain grace the master waits
FINAL_MARGIN_S = 15.0
#: how often the master looks for workers Locust marked missing (no heartbeat for ~3 s)
LOST_CHECK_S = 1.0
#: a worker is lost after this long missing (or gone without its final result): a busy worker on a
#: loaded machine misses a few heartbeats and comes back, which Locust calls self-healing
LOST_AFTER_S = 10.0


class Collector:
    """The master half: hands out shares, gathers deltas and final results, writes the run files.

    Works with a MasterRunner (workers in other processes or machines) and with a LocalRunner
    (a WorkerAgent in the same process). Callbacks run in the messaging greenlet; keep them short.
    """

    def __init__(
        self,
        environment: Environment,
        *,
        on_delta: Callable[[int, Delta], None] | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.env = environment
        self.on_delta = on_delta
        self.on_event = on_event or (lambda _name, _line: None)
        self.run_id: str | None = None
        self.run_dir: Path | None = None
        self.plan: LoadPlan | None = None
        self.workers: dict[str, int] = {}
        self.n = 0
        self.progress: dict[int, dict[str, Any]] = {}
        self.results: dict[int, dict[str, Any]] = {}
        self.reasons: dict[int, str] = {}
        self.started: set[int] = set()
        self.drained: set[int] = set()
        self.all_final = gevent.event.Event()
        self.stop_sent = False
        #: a worker lost mid-run (no heartbeat, connection gone): what it had reported is kept
        self.lost: dict[int, str] = {}
        self.reported: dict[int, MetricSet] = {}  # each worker's deltas, merged as they arrive
        self.window_t: dict[int, list[float]] = {}  # each worker's window start and latest delta time
        self._watch: gevent.Greenlet | None = None
        self._requests: Any = None
        self._progress_file: Any = None
        runner = environment.runner
        if runner is None:
            raise RuntimeError("the collector needs Locust's runner: create it before the collector")
        self.runner = runner
        runner.register_message(Delta.TYPE, self._on_delta)
        runner.register_message(Final.TYPE, self._on_final)

    # ---------------------------------------------------------------- hand-out
    def clients(self) -> list[str]:
        """Client ids of the workers that take part, in the master's stable worker order."""
        runner = self.env.runner
        if isinstance(runner, MasterRunner):
            nodes = runner.clients.ready + runner.clients.spawning + runner.clients.running
            return sorted((n.id for n in nodes), key=runner.get_worker_index)
        return ["local"]

    def begin(self, plan: LoadPlan, run_dir: Path, clients: list[str] | None = None) -> None:
        self.close()
        clients = self.clients() if clients is None else clients
        self.run_id = uuid.uuid4().hex[:12]
        self.run_dir = Path(run_dir)
        self.plan = plan
        self.n = len(clients)
        self.workers = {cid: k for k, cid in enumerate(clients)}
        self.progress, self.results, self.reasons = {}, {}, {}
        self.started, self.drained = set(), set()
        self.all_final = gevent.event.Event()
        self.stop_sent = False
        self.lost, self.reported, self.window_t = {}, {}, {}
        if isinstance(self.env.runner, MasterRunner):
            self._watch = gevent.spawn(self._watch_workers, self.run_id)
        self._requests = open(self.run_dir / "requests.jsonl", "a", buffering=1 << 16)
        self._progress_file = open(self.run_dir / "progress.jsonl", "a", buffering=1)
        if not clients:
            self.all_final.set()
            return
        for cid, k in self.workers.items():
            share = plan.model_copy(update={"worker": k, "workers": self.n})
            self.runner.send_message(
                Plan.TYPE, Plan(run=self.run_id, plan=share.model_dump(mode="json")).wire(), client_id=cid
            )

    # ---------------------------------------------------------------- messages
    def _mine(self, m: Delta | Final) -> bool:
        return self.run_id is not None and m.run == self.run_id

    def _on_delta(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        data = Delta.of(msg.data)
        if not self._mine(data):
            return
        k = int(data.worker)
        if data.requests and self._requests is not None:
            self._requests.write(data.requests)
        if data.metrics:  # kept so a worker lost mid-run still counts what it reported
            self.reported.setdefault(k, MetricSet()).merge_dict(data.metrics)
        span = self.window_t.setdefault(k, [0.0, 0.0])
        span[1] = data.t
        if k in self.lost:  # heard from after it was declared lost: what it reports still counts
            self._write_reported(k)
        progress = data.progress or {}
        self.progress[k] = progress
        if self._progress_file is not None and progress:
            self._progress_file.write(json.dumps(progress) + "\n")
        for line in data.events:
            event = line.get("event")
            if event == "window_start":
                span[0] = float(line.get("t", data.t))
                first = not self.started
                self.started.add(k)
                if first:
                    self.on_event("window_start", line)
            elif event == "window_end":
                self.on_event("worker_window_end", {**line, "worker": k})
            elif event == "drained":
                self.drained.add(k)
                if len(self.drained) == self.n:
                    self.on_event("drained", line)
        if self.on_delta is not None:
            self.on_delta(k, data)

    def _on_final(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        data = Final.of(msg.data)
        if not self._mine(data):
            return
        k = int(data.worker)
        if k in self.lost:  # declared lost, then its final result came after all: it wins
            self.lost.pop(k)
        result = data.result
        self.results[k] = result
        self.reasons[k] = data.reason
        if self.run_dir is not None:
            path = self.run_dir / (f"load_result.w{k}.json" if self.n > 1 else "load_result.json")
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(result))
            os.replace(tmp, path)
        if k not in self.drained:
            self.drained.add(k)
            if len(self.drained) == self.n:
                self.on_event("drained", {"event": "drained", "t": time.time()})
        self._maybe_all_final()
        self.on_event("final", {"worker": k, "reason": self.reasons[k]})

    def _maybe_all_final(self) -> None:
        if len(self.results) + len(self.lost) >= self.n and not self.all_final.is_set():
            self._flush()
            self.all_final.set()

    # ---------------------------------------------------------------- lost workers
    def _watch_workers(self, run_id: str | None) -> None:
        """Declare a worker lost when Locust stops hearing from it before its final result."""
        runner = self.runner
        if not isinstance(runner, MasterRunner):
            return  # only a master has workers to watch
        suspect: dict[int, float] = {}  # worker -> when it was first seen missing or gone
        while run_id == self.run_id and not self.all_final.is_set():
            gevent.sleep(LOST_CHECK_S)
            now = time.monotonic()
            for cid, k in list(self.workers.items()):
                if k in self.results or k in self.lost:
                    continue
                node = runner.clients.get(cid)
                if node is not None and node.state != STATE_MISSING:
                    suspect.pop(k, None)  # heard from again
                    continue
                since = suspect.setdefault(k, now)
                if now - since >= LOST_AFTER_S:
                    self.lose(
                        k,
                        f"no heartbeat from it for {LOST_AFTER_S + 3:.0f} s"
                        if node is not None
                        else "it left without its final result",
                    )

    def lose(self, k: int, why: str) -> None:
        """Write what worker k reported before it was lost as its result, and stop waiting for it."""
        if k in self.lost or k in self.results or self.run_dir is None:
            return
        self.lost[k] = why
        reported = self._write_reported(k)
        done = sum(cm.counts.get("completed", 0) for cm in reported.by_class.values())
        log.error("worker %d was lost mid-run (%s); the %d requests it had reported are kept", k, why, done)
        self.drained.add(k)
        self.on_event("worker_lost", {"worker": k, "reason": why, "requests": done})
        if len(self.drained) == self.n:
            self.on_event("drained", {"event": "drained", "t": time.time()})
        self._maybe_all_final()

    def _write_reported(self, k: int) -> MetricSet:
        """load_result.wK.json of a lost worker: the deltas it sent, marked `lost`."""
        reported = self.reported.get(k) or MetricSet()
        progress = self.progress.get(k, {})
        start, last = self.window_t.get(k, [0.0, 0.0])
        result = {
            "worker": k,
            "lost": self.lost[k],
            "metrics": reported.to_dict(),
            "window": {
                "start": start or None,
                "end": last or None,
                "duration_s": max(0.0, last - start) if start else 0.0,
                "warmup_s": 0.0,
                "warmup_requests": int(progress.get("warmup_done", 0) or 0),
                "drain_s": 0.0,
            },
            "sent": int(progress.get("sent", 0) or 0),
            "cut_at_end": int(progress.get("in_flight", 0) or 0),  # in flight when last heard of: lost
            "timing": {"clock_by_request": {}, "coalesced_reads": 0},
            "usage_check": {},
            "client": {},
        }
        assert self.run_dir is not None
        path = self.run_dir / (f"load_result.w{k}.json" if self.n > 1 else "load_result.json")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(result))
        os.replace(tmp, path)
        return reported

    # ---------------------------------------------------------------- the end
    def stop_workers(self) -> None:
        """Ask every worker that has not reported yet to stop and report (once)."""
        if self.run_id is None or self.stop_sent:
            return
        self.stop_sent = True
        for cid, k in self.workers.items():
            if k not in self.results and k not in self.lost:
                self.runner.send_message(Stop.TYPE, Stop(run=self.run_id).wire(), client_id=cid)

    def stage(self, label: str, users: int) -> None:
        """A LoadTestShape stage began: every worker labels the requests it sends from now on."""
        if self.run_id is None or self.stop_sent:
            return
        for cid, k in self.workers.items():
            if k not in self.results:
                self.runner.send_message(
                    Stage.TYPE, Stage(run=self.run_id, stage=label, users=users).wire(), client_id=cid
                )

    def wait_finals(self, timeout_s: float) -> list[int]:
        """Wait until every worker's final result arrived; returns the missing workers (timeout)."""
        self.all_final.wait(timeout_s)
        missing = sorted(set(self.workers.values()) - set(self.results) - set(self.lost))
        if missing:
            log.error(
                "final results of worker(s) %s did not arrive within %.0f s; their measurements are missing",
                ", ".join(map(str, missing)),
                timeout_s,
            )
        self._flush()
        return missing

    def final_timeout_s(self) -> float:
        grace = self.plan.stop_grace_s if self.plan is not None else 30.0
        return grace + FINAL_MARGIN_S

    def totals(self) -> dict[str, Any]:
        """Progress summed over workers (the same keys as one load process's progress line)."""
        lines = list(self.progress.values())
        out: dict[str, Any] = {"workers": self.n}
        for key in ("sent", "done", "failed", "in_flight", "output_tokens", "warmup_done"):
            out[key] = sum(int(p.get(key, 0) or 0) for p in lines)
        phases = {p.get("phase") for p in lines}
        for phase in ("warmup", "measure", "drain", "done"):
            if phase in phases:
                out["phase"] = phase
                break
        out["elapsed_s"] = max((p.get("elapsed_s", 0.0) for p in lines), default=0.0)
        out["cpu_pct"] = max((p.get("cpu_pct", 0.0) for p in lines if p.get("phase") != "done"), default=0.0)
        plan = self.plan
        if plan is not None:
            out["duration_s"] = plan.scenario["load"].get("duration_s")
            out["requests_target"] = plan.scenario["load"].get("requests")
        return out

    def _flush(self) -> None:
        for f in (self._requests, self._progress_file):
            if f is not None:
                with contextlib.suppress(OSError, ValueError):
                    f.flush()

    def close(self) -> None:
        if self._watch is not None:
            self._watch.kill(block=False)
            self._watch = None
        for f in (self._requests, self._progress_file):
            if f is not None:
                with contextlib.suppress(OSError, ValueError):
                    f.close()
        self._requests = self._progress_file = None


# ====================================================================== headless entry points
