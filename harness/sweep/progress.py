"""Progress lines for a long sweep: what is running, cells done/total, ETA, the last result.

Plain lines (they survive `nohup ... > sweep.out`); on a terminal the readiness wait and the
running cell (its own progress line: elapsed, requests, tokens/s, KV) update one status line in
place; off a terminal the running cell prints a plain line every `live_interval_s`.

The ETA is extrapolated from the wall time the sweep has taken so far per planned second of
load (engine starts, drains and stops included), so it counts down instead of being revised
upward cell after cell; before the first cell finished only a lower bound is known ("ETA ≥").
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from harness.results.engine_facts import facts_line
from harness.results.models.facts import StartupFacts
from harness.results.models.sweep import Cell as IndexCell
from harness.results.sweep_index import cell_label
from harness.sweep.flags import describe


def fmt_duration(s: float | None) -> str:
    if s is None:
        return "?"
    s = round(s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _thousands(v: float | str) -> str:
    return f"{v:,}" if isinstance(v, (int, float)) else str(v)


def result_line(entry: IndexCell) -> str:
    m = entry.metrics
    head = f"{entry.config_id} · {cell_label(entry)} r{entry.repeat}: {entry.status}"
    if entry.status == "failed" and not m.completed:
        return f"{head}: {entry.reason or ''}".rstrip(": ")

    def f(v: float | None, spec: str, unit: str = "") -> str:
        return "-" if v is None else f"{v:{spec}}{unit}"

    parts = [
        f"goodput {f(m.goodput_req_per_s, '.2f')} req/s",
        f"throughput {f(m.req_per_s, '.2f')} req/s",
        f"{f(m.output_tok_per_s, '.0f')} tok/s",
        f"TTFT p99 {f(m.ttft_p99_ms, '.0f', ' ms')}",
        f"ITL p99 {f(m.itl_p99_ms, '.1f', ' ms')}",
        f"preemptions {f(m.preemptions, '.0f')}",
    ]
    line = f"{head} · " + " · ".join(parts)
    if entry.reason:
        line += f" ({entry.reason})"
    return line


class Progress:
    def __init__(self, total_cells: int, total_starts: int, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.total = total_cells
        self.total_starts = total_starts
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = self.enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.done = 0
        self.starts = 0
        self.cell_times: list[float] = []
        self.startup_times: list[float] = []
        self.estimate_cell_s: float | None = None  # before any cell finished: from the scenarios
        #: cell id -> planned seconds of load (warmup + window) of the cells this session runs
        self.planned: dict[str, float | None] = {}  # None: a request count (no planned seconds)
        self.live_interval_s = 15.0  # off a terminal: one in-cell line this often
        self._status_open = False
        self._done_ids: set[str] = set()
        self._t0: float | None = None  # first engine start of this session
        self._work_done_s = 0.0  # planned seconds of the cells finished in this session
        self._s_per_planned_s: float | None = None  # wall seconds per planned second, measured
        self._cell: tuple[str, float] | None = None  # running cell: id, start (monotonic)
        self._last_live = 0.0

    def _print(self, text: str) -> None:
        if not self.enabled:
            return
        if self._status_open:
            self.stream.write("\r\x1b[K")
            self._status_open = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def _planned_s(self, cell_id: str) -> float:
        value = self.planned.get(cell_id)
        if value is None:
            known = [v for v in self.planned.values() if v is not None]
            value = sum(known) / len(known) if known else (self.estimate_cell_s or 0.0)
        return value

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left; see `eta_text` for whether it is an estimate or a lower bound."""
        left = self.total - self.done
        if left <= 0:
            return 0.0
        now = time.monotonic() if now is None else now
        pending = [cid for cid in self.planned if cid not in self._done_ids]
        if not self.planned:  # no plan given (a caller that is not the executor): per finished cell
            per_cell = sum(self.cell_times) / len(self.cell_times) if self.cell_times else self.estimate_cell_s
            if per_cell is None:
                return None
            per_start = sum(self.startup_times) / len(self.startup_times) if self.startup_times else 0.0
            return left * per_cell + max(0, self.total_starts - self.starts) * per_start
        running = self._cell[0] if self._cell else None
        rest = sum(self._planned_s(cid) for cid in pending if cid != running)
        current = 0.0
        if running is not None:
            current = self._planned_s(running)
        if self._s_per_planned_s is None:  # lower bound: the load alone, plus the engine starts left
            into = now - self._cell[1] if self._cell else 0.0
            per_start = sum(self.startup_times) / len(self.startup_times) if self.startup_times else 0.0
            return rest + max(0.0, current - into) + max(0, self.total_starts - self.starts) * per_start
        into = now - self._cell[1] if self._cell else 0.0
        return max(0.0, (rest + current) * self._s_per_planned_s - into)

    def eta_text(self, now: float | None = None) -> str:
        eta = self.eta(now)
        bound = "≥" if self.planned and self._s_per_planned_s is None and self.done < self.total else ""
        return f"ETA {bound}{fmt_duration(eta)}"

    # ------------------------------------------------------------ events
    def skipped(self, n: int) -> None:
        self.done += n
        if n:
            self._print(f"resume: {n} finished cell(s) kept, {self.total - self.done} to run")

    def engine_starting(self, config_id: str, varied: dict[str, Any], argv: list[str], n_cells: int) -> None:
        self.starts += 1
        if self._t0 is None:
            self._t0 = time.monotonic()
        import shlex

        what = describe(varied) or "base flags"
        label = config_id if what == config_id else f"{config_id} ({what})"
        self._print(f"▶ start {self.starts}/{self.total_starts}: config {label}, {n_cells} cell(s)")
        self._print(f"  $ {shlex.join(argv)}" if argv else "  (a server already running: nothing is started)")

    def waiting(self, elapsed: float, detail: str) -> None:
        if self.tty:
            self.stream.write(f"\r\x1b[K  waiting for readiness: {elapsed:.0f}s ({detail[:80]})")
            self.stream.flush()
            self._status_open = True

    def engine_ready(self, startup_s: float, facts: StartupFacts) -> None:
        self.startup_times.append(startup_s)
        bits = [f"ready in {startup_s:.1f}s"]
        if facts.kv_cache_tokens is not None:
            bits.append(f"KV cache {_thousands(facts.kv_cache_tokens)} tokens")
        if facts.max_concurrency is not None:
            bits.append(f"max concurrency {facts.max_concurrency}x")
        self._print("  " + " · ".join(bits))
        more = facts_line(facts)
        if more:
            self._print(f"  {more}")
        if facts.max_model_len_warning:
            self._print(f"  ! {facts.max_model_len_warning}")

    def engine_failed(self, reason: str, tail: list[str]) -> None:
        self._print(f"  ✗ engine did not start: {reason}")
        for line in tail[-5:]:
            self._print(f"    | {line[:200]}")

    def cell_starting(self, entry_id: str, scenario: str, repeat: int) -> None:
        if self._t0 is None:
            self._t0 = time.monotonic()
        self._cell = (entry_id, time.monotonic())
        self._last_live = time.monotonic()
        self._print(f"  [{self.done + 1}/{self.total}] {scenario} r{repeat} … ({self.eta_text()})")

    def cell_progress(self, text: str) -> None:
        """The running cell's own progress line (the runner's: elapsed, requests, tokens/s, KV)."""
        if not self.enabled or self._cell is None:
            return
        line = f"    {text.strip()}  · sweep {self.eta_text()}"
        if self.tty:
            self.stream.write("\r\x1b[K" + line[:200])
            self.stream.flush()
            self._status_open = True
        elif time.monotonic() - self._last_live >= self.live_interval_s:
            self._last_live = time.monotonic()
            self._print(line)

    def cell_done(self, entry: IndexCell, wall_s: float | None) -> None:
        self.done += 1
        cid = entry.id
        if cid is not None and cid not in self._done_ids:
            self._done_ids.add(cid)
            if cid in self.planned:
                self._work_done_s += self._planned_s(cid)
        if self._cell is not None and self._cell[0] == cid:
            self._cell = None
        if self._t0 is not None and self._work_done_s > 0:
            self._s_per_planned_s = (time.monotonic() - self._t0) / self._work_done_s
        if wall_s is not None and entry.status != "failed":
            self.cell_times.append(wall_s)
        mark = {"complete": "✓", "partial": "~", "failed": "✗"}.get(entry.status, "?")
        self._print(f"  {mark} [{self.done}/{self.total}] {result_line(entry)}")

    def note(self, text: str) -> None:
        self._print(f"  note: {text}")

    def finished(self, elapsed: float, counts: dict[str, int]) -> None:
        summary = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        self._print(f"sweep finished in {fmt_duration(elapsed)}: {summary or 'no cells'}")


class Clock:
    """Monotonic stopwatch (separate so tests can read it)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0
