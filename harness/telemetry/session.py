"""TelemetrySession: engine telemetry beside one run, on a background thread.

Lifecycle, called by the run orchestrator (a plain process, no gevent):

    s = TelemetrySession(target_url=..., config=scenario.telemetry, out_dir=run_dir, ...)
    s.start()               # thread: one scrape every config.interval_s -> engine_metrics.jsonl
    s.mark_window_start()   # after warmup: the baseline scrape starts at once
    s.mark_window_end()     # after the last measured request: the final scrape starts at once
    engine = s.stop()       # the summary's `engine` block; never raises
    s.live()                # any time: latest canonical values, for live displays

Nothing here blocks the caller for long: marks only start a thread; scrapes run on threads, each
bounded by `telemetry.timeout_s` (10 s, Prometheus' default: a busy vLLM on two cores took 2.1 s to
serve /metrics, so a timeout tied to the interval lost whole windows). Each mark gets its own
scrape, because counters are window deltas between exactly those two scrapes. A mark's scrape
starts at once on a thread and connection of its own (`Source.twin`): queued behind a periodic
scrape in flight, a /metrics slowed to 5 s made every run 10 s longer and the baseline late (issue
#19); now the end of a run waits for ONE scrape, at most one timeout. A periodic scrape that began
before the baseline is not accumulated; one answering after the final began is dropped, failure
included (after the final it would end the window late). Periodic scrapes (one thread, never piling
up) pause while the baseline is in flight and stop at the end mark; the final scrape is applied
after the baseline, whichever answers first.

Failure policy: the first failure logs ONE warning and records the reason; a permanent one (404,
HTML/JSON, garbage) turns telemetry off at once, transient ones (timeout, refused) stop the
periodic scrapes after 3 in a row. The final scrape is still attempted after transient failures
(and retried once after a quick one, such as a 503): with the baseline it gives exact counter
deltas for the whole window, which is what the prefix-cache hit rate and preemption count need;
only the gauge samples are then partial.
Before the window starts, transient failures are tolerated quietly (the engine may still be
starting). The run goes on either way and the block says why values are null.

Sources (harness.telemetry.sources, one class each behind the `Source` Protocol, picked by its
`choose_source`): direct scraping (default), a Prometheus server (`config.prometheus`), or none
(disabled, no URL, an engine kind without /metrics). GPU memory: NVML when the target is this
machine, or DCGM series in Prometheus mode (harness.telemetry.block.gpu_block). The per-scrape
lines of engine_metrics.jsonl are written by harness.telemetry.scrape_log.
"""

from __future__ import annotations

import contextlib
import logging
import pathlib
import threading
import time
from typing import Any
from urllib.parse import urlparse

from harness.engines import Profile, detect_profile, hint_profile, profiles
from harness.telemetry.block import empty_block, gpu_block, gpu_unavailable
from harness.telemetry.exposition import Snapshot, TelemetryUnavailable
from harness.telemetry.nvml import NvmlSampler, is_local_url
from harness.telemetry.scrape_log import ScrapeLog, canonical_values
from harness.telemetry.session_summary import session_block
from harness.telemetry.sources import Source, choose_source
from harness.telemetry.window import WindowAccumulator

log = logging.getLogger("harness.telemetry")

MAX_CONSECUTIVE_FAILURES = 3


class TelemetrySession:
    def __init__(
        self,
        *,
        target_url: str | None,
        config: Any,
        out_dir: pathlib.Path,
        expected_prefix_hit_rate: float | None = None,
        engine_kind: str | None = None,
    ) -> None:
        self.config = config
        self.target_url = target_url
        self.out_dir = pathlib.Path(out_dir)
        self.expected_hit_rate = expected_prefix_hit_rate
        self.engine_kind = engine_kind
        self.interval_s = float(config.interval_s)

        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._end_done = threading.Event()
        self._baseline_sent = threading.Event()
        self._baseline_done = threading.Event()
        self._ready = threading.Event()  # NVML opened, the source checked: the marks' scrapes wait for it
        self._thread: threading.Thread | None = None
        self._final_thread: threading.Thread | None = None
        self._mark_srcs: list[Source] = []  # the marks' own connections
        self._result: dict | None = None

        # explicit profile: a typo is a user error, raised here (before the run), with the choices
        self._profile: Profile | None = profiles().get(config.profile) if config.profile else None
        self._hint: Profile | None = hint_profile(engine_kind)

        self._warned = False
        self._disabled = False
        self._consecutive_failures = 0
        self._failures = 0
        self._last_error: str | None = None
        self._last_exc: TelemetryUnavailable | None = None
        self._attempts = 0
        self._scrape_ms: list[float] = []
        self._page_bytes = 0

        self._phase = "pre"  # pre -> window -> post
        self._baseline_began = False
        self._final_began = False  # from here on, periodic scrapes in flight are dropped
        self._t0: float | None = None
        self._t1: float | None = None
        self._acc: WindowAccumulator | None = None
        self._baseline_late = False
        #: unix times the marks' scrapes were sent (the window's counter edges): with the load's own
        #: window times they say how late the edges were (harness.telemetry.reconcile.counter_coverage)
        self._edge_at: dict[str, float] = {}
        self._idle_before = False
        #: the last periodic scrape answered before the window opened (the idle counters' values)
        self._idle_snap: Snapshot | None = None
        self._acc_idle: float | None = None  # the idle scrape's time, when it is the counters' baseline
        self._live: dict[str, Any] = {"ok": False}
        self._jsonl: ScrapeLog | None = None

        #: where the engine's metrics come from (harness.telemetry.sources); None: no source
        self._src: Source | None
        self._missing_reason: str | None  # why there is no source, or what turned telemetry off
        self._src, self._missing_reason = choose_source(config, target_url, engine_kind)
        #: the final scrape succeeded after periodic scrapes were turned off by transient failures
        self._final_recovered = False

        self._nvml: NvmlSampler | None = None
        self._gpu_reason: str | None = None
        if not config.enabled:
            self._gpu_reason = "telemetry disabled"
        elif not config.nvml:
            self._gpu_reason = "NVML sampling off (telemetry.nvml: false)"
        else:
            self._nvml = NvmlSampler()

    @property
    def source(self) -> str:
        """The block's `source`: direct, prometheus or none."""
        return self._src.name if self._src is not None else "none"

    # ================================================================== public API
    def start(self) -> None:
        with self._lock:
            if self._thread is not None or not self.config.enabled:
                return
            if self._missing_reason and self.source == "none":
                self._warn(self._missing_reason, permanent=True)
            self._jsonl = ScrapeLog(self.out_dir)
            self._thread = threading.Thread(target=self._run, name="harness-telemetry", daemon=True)
            self._thread.start()

    def mark_window_start(self, *, idle_before: bool = False) -> None:
        """`idle_before`: the run sent no request before the window (no warmup), so the last
        periodic scrape answered before this mark holds the counters' values at the window's
        start (WindowAccumulator.from_idle); the mark's own scrape may be answered late."""
        try:
            with self._lock:
                if self._t0 is not None:
                    return
                self._idle_before = idle_before
                self._t0 = time.time()
                self._phase = "window"
                self._baseline_began = True
                self._ensure_started()
                if self._thread is not None:
                    threading.Thread(
                        target=self._mark, args=("start",), name="harness-telemetry-start", daemon=True
                    ).start()
        except Exception:
            log.exception("engine telemetry: mark_window_start failed")

    def mark_window_end(self) -> None:
        try:
            with self._lock:
                if self._t1 is not None:
                    return
                self._t1 = time.time()
                self._ensure_started()
                if self._thread is not None:
                    self._final_thread = threading.Thread(
                        target=self._mark, args=("end",), name="harness-telemetry-final", daemon=True
                    )
                    self._final_thread.start()
        except Exception:
            log.exception("engine telemetry: mark_window_end failed")

    def live(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._live)

    def stop(self) -> dict:
        if self._result is not None:
            return self._result
        try:
            if self._thread is not None:
                if self._t1 is None and self._t0 is not None:
                    self.mark_window_end()
                if self._final_thread is not None:
                    self._end_done.wait(timeout=self._scrape_budget_s())
                self._stopping.set()
                self._wake.set()
                # not waiting for a periodic scrape in flight: its answer is dropped (_scrape)
                self._thread.join(timeout=0.5)
            with self._lock:
                self._result = self._build()
        except Exception as exc:
            log.exception("engine telemetry: internal error while summarizing")
            self._result = empty_block(
                source=self.source,
                missing_reason=f"telemetry internal error: {type(exc).__name__}: {exc}",
                expected_hit_rate=self.expected_hit_rate,
                gpu_memory=gpu_unavailable("telemetry internal error"),
            )
        finally:
            self._close()
        return self._result

    # ================================================================== thread
    def _ensure_started(self) -> None:
        if self._thread is None and self.config.enabled:
            self.start()

    def _scrape_budget_s(self) -> float:
        """How long stop() waits for the final scrape: that one scrape (it does not queue behind a
        periodic one), retried only after a quick failure, so a hung endpoint costs one timeout."""
        return self._src.budget_s() if self._src is not None else 2.0

    def _run(self) -> None:
        try:
            self._open()
        finally:
            self._ready.set()
        next_due = time.monotonic()
        while True:
            self._wake.wait(max(0.0, next_due - time.monotonic()))
            self._wake.clear()
            if self._stopping.is_set():
                return
            if time.monotonic() < next_due:
                continue
            started = time.monotonic()
            with self._lock:
                # the final scrape has the last word; the baseline in flight comes first
                paused = self._t1 is not None or (self._baseline_began and not self._baseline_done.is_set())
            if not paused:
                try:
                    self._tick([])
                except Exception as exc:
                    log.exception("engine telemetry: scrape loop error")
                    self._fail(TelemetryUnavailable(f"internal error: {type(exc).__name__}: {exc}", permanent=True))
            next_due = started + self.interval_s

    def _open(self) -> None:
        if self._nvml is not None:
            reason = (
                self._nvml.open()
                if is_local_url(self.target_url)
                else (
                    f"target {urlparse(self.target_url or '').hostname} is not this machine; NVML sees only local GPUs"
                )
            )
            if reason:
                self._gpu_reason = reason
                self._nvml.close()
                self._nvml = None
        if self._src is not None:
            try:
                self._src.check()  # Prometheus: reachable, the selector matches (direct: nothing to check)
            except TelemetryUnavailable as exc:
                self._fail(exc, count_pre_window=True)

    def _mark(self, mark: str) -> None:
        """A mark's scrape, at once, on a thread and connection of its own (module docstring); after
        the source check (a Prometheus that is not one is not asked again) and NVML's opening."""
        try:
            self._ready.wait(timeout=self._scrape_budget_s())
            if mark == "end" and self._t0 is not None:
                self._baseline_sent.wait(timeout=1.0)  # the baseline's request goes out first
            with self._lock:
                src = self._src.twin() if self._src is not None else None
                if src is not None:
                    self._mark_srcs.append(src)
            self._tick([mark], src)
        except Exception as exc:
            log.exception("engine telemetry: %s scrape error", mark)
            self._fail(TelemetryUnavailable(f"internal error: {type(exc).__name__}: {exc}", permanent=True))
        finally:
            if mark == "end":
                with self._lock:
                    self._phase = "post"
            (self._end_done if mark == "end" else self._baseline_done).set()

    def _tick(self, marks: list[str], src: Source | None = None) -> None:
        src = src or self._src
        snap: Snapshot | None = None
        final = "end" in marks
        with self._lock:
            if final:
                self._final_began = True
            # a periodic scrape that began before the baseline: the baseline is a scrape of its own
            before_baseline = not marks and not self._baseline_began
            # the final scrape is worth trying after transient failures (not after a permanent one)
            attempted = (
                self.source != "none"
                and src is not None
                and (
                    not self._disabled
                    or (
                        final
                        and (self._acc is not None or not self._baseline_done.is_set())
                        and not self._permanently_off()
                    )
                )
            )
        if "start" in marks:
            self._baseline_sent.set()
        if attempted:
            assert src is not None
            began = time.monotonic()
            snap = self._scrape(src, periodic=not marks)
            # a refusal or a 503, not a hung endpoint (that would not answer a second time either)
            quick_failure = time.monotonic() - began < min(1.0, 0.5 * float(self.config.timeout_s))
            if snap is None and final and quick_failure and not self._permanently_off():
                time.sleep(min(1.0, self.interval_s))
                snap = self._scrape(src, periodic=False)
            if snap is not None and final and self._disabled:
                self._final_recovered = True
        if final and self._t0 is not None:  # applied after the baseline, whichever answered first
            self._baseline_done.wait(timeout=self._scrape_budget_s())
        gpu = None
        with self._lock:
            if not marks and (self._final_began or self._stopping.is_set()):
                return  # answered after the final scrape began: dropped (see _scrape)
            if "start" in marks and self._nvml is not None:
                self._nvml.reset_window()
            in_window = self._phase == "window" or "start" in marks or "end" in marks
            if self._nvml is not None and in_window:
                gpu = self._nvml.sample()
            if before_baseline and snap is not None and self._t0 is None:
                self._idle_snap = snap  # answered before the window opened
            # a periodic scrape is not accumulated while the baseline is outstanding
            accumulate = bool(marks) or (not before_baseline and self._baseline_done.is_set())
            if snap is not None and self._src is not None and self._src.live_window and accumulate:
                self._accumulate(snap, marks)
                for mark in marks:
                    self._edge_at[mark] = snap.ts
                if "start" in marks and self._acc is not None and self._acc_idle:
                    self._edge_at["start"] = self._acc_idle
            if "end" in marks:
                self._phase = "post"
            if "start" in marks:
                self._baseline_done.set()
            self._record(snap, gpu, marks, attempted)

    def _permanently_off(self) -> bool:
        return self._last_exc is not None and self._last_exc.permanent and self._disabled

    def _accumulate(self, snap: Snapshot, marks: list[str]) -> None:
        profile = self._profile
        if profile is None:
            return
        if "start" in marks and self._idle_before and self._idle_snap is not None:
            self._acc = WindowAccumulator.from_idle(profile, self._idle_snap, snap)
            self._acc_idle = self._idle_snap.ts
        elif "start" in marks or (self._phase == "window" and self._acc is None):
            if "start" not in marks:
                self._baseline_late = True
            self._acc = WindowAccumulator(profile, snap)
        elif self._phase == "window" and self._acc is not None:
            self._acc.add(snap)  # the final scrape ("end" mark) included: phase turns post after

    def _scrape(self, src: Source, *, periodic: bool) -> Snapshot | None:
        """One scrape of `src`, applied under the lock; a periodic one answering after the final
        began (or after stop()) is dropped, failure included: the window ends at the final."""
        t = time.perf_counter()
        try:
            snap, profile = src.scrape(self._profile, self._choose_profile)
            error = None
        except TelemetryUnavailable as exc:
            snap, profile, error = None, None, exc
        with self._lock:
            if periodic and (self._final_began or self._stopping.is_set()):
                return None
            self._attempts += 1
            if error is not None:
                self._fail(error)
                return None
            self._profile = profile
            self._scrape_ms.append((time.perf_counter() - t) * 1000)
            self._page_bytes = src.page_bytes or self._page_bytes
            self._consecutive_failures = 0
            return snap

    def _choose_profile(self, names: set[str]) -> Profile:
        found = detect_profile(names)
        if found is None and self._hint is not None and any(n.startswith(self._hint.prefixes) for n in names):
            found = self._hint
        if found is None:
            seen = sorted({n.split("_", 1)[0] + "_" for n in names if n})[:8]
            where = self._src.where if self._src is not None else "no source"
            raise TelemetryUnavailable(
                f"no vLLM/SGLang/TGI/llama.cpp metrics at {where}"
                + (f" (name prefixes seen: {', '.join(seen)})" if seen else "")
                + "; set telemetry.profile or telemetry.metrics_url"
            )
        if self._hint is not None and found.name != self._hint.name:
            log.info(
                "engine telemetry: engine kind %s but metrics look like %s; using %s",
                self.engine_kind,
                found.name,
                found.name,
            )
        return found

    # ================================================================== failures
    def _warn(self, reason: str, *, permanent: bool) -> None:
        if self._warned:
            return
        self._warned = True
        what = (
            "off for this run"
            if permanent
            else (f"retrying every {self.interval_s:g} s, off after {MAX_CONSECUTIVE_FAILURES} failures in a row")
        )
        log.warning("engine telemetry: %s (%s; the run goes on, engine values will be null)", reason, what)

    def _fail(self, exc: TelemetryUnavailable, *, count_pre_window: bool = False) -> None:
        with self._lock:
            self._failures += 1
            self._last_error = exc.reason
            self._last_exc = exc
            pre_window = self._phase == "pre" and not count_pre_window
            if pre_window and not exc.permanent:
                log.debug("engine telemetry (before the window): %s", exc.reason)
                return
            self._consecutive_failures += 1
            if self._missing_reason is None or self._acc is None:
                self._missing_reason = exc.reason
            self._live = {**self._live, "ok": False, "error": exc.reason}
            self._warn(exc.reason, permanent=exc.permanent)
            if exc.permanent or self._consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
                if not self._disabled:
                    log.info(
                        "engine telemetry disabled after %d failure(s): %s", self._consecutive_failures, exc.reason
                    )
                self._disabled = True
                self._missing_reason = exc.reason

    # ================================================================== records
    def _record(self, snap: Snapshot | None, gpu: list | None, marks: list[str], attempted: bool) -> None:
        line: dict[str, Any] = {"t": round(snap.ts if snap else time.time(), 3), "phase": self._phase}
        if marks:
            line["mark"] = ",".join(marks)
        if snap is not None and self._profile is not None:
            values = canonical_values(self._profile, snap)
            line.update({"ok": True, "source": self.source, **values})
            if self._scrape_ms:
                line["scrape_ms"] = round(self._scrape_ms[-1], 2)
            self._live = {"ok": True, "t": line["t"], "source": self.source, "profile": self._profile.name, **values}
        else:
            line["ok"] = False
            if attempted and self._last_error:
                line["error"] = self._last_error
        if gpu is not None:
            line["gpu_used_bytes"] = [g["used_bytes"] for g in gpu]
            self._live["gpu_used_bytes"] = line["gpu_used_bytes"]
        if self._jsonl is not None and (attempted or gpu is not None or marks):
            self._jsonl.write(line)

    # ================================================================== summary
    def _gpu_block(self, acc: Any = None) -> dict:
        return gpu_block(self._nvml, acc, self._gpu_reason)

    def _telemetry_extra(self) -> dict[str, Any]:
        ms = self._scrape_ms
        return {
            "interval_s": self.interval_s,
            "failures": self._failures,
            "scrape_ms": {"mean": round(sum(ms) / len(ms), 2), "max": round(max(ms), 2)} if ms else None,
            "page_bytes": self._page_bytes or None,
            "baseline_late": self._baseline_late,
            "baseline_at": self._edge_at.get("start"),
            "final_at": self._edge_at.get("end"),
        }

    def _window_s(self) -> float | None:
        """The marked window (the client's); None when not both marks were given."""
        if (
            self._t0 is None
            or self._t1 is None
            or self._baseline_late
            or (self._disabled and not self._final_recovered)
        ):
            return None
        return self._t1 - self._t0

    def _build(self) -> dict:
        return session_block(self)

    def _close(self) -> None:
        with self._lock:  # a scrape thread still in flight writes nothing after this
            jsonl, self._jsonl = self._jsonl, None
        for closer in (
            jsonl.close if jsonl else None,
            self._src.close if self._src else None,
            *(src.close for src in self._mark_srcs),
            self._nvml.close if self._nvml else None,
        ):
            if closer is None:
                continue
            with contextlib.suppress(Exception):  # closing after the block is built
                closer()
