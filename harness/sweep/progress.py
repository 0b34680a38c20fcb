"""Progress lines for a long sweep: what is running, cells done/total, ETA, the last result.

Plain lines (they survive `nohup ... > sweep.out`); on a terminal the readiness wait also
updates one status line in place.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from harness.sweep.flags import describe
from harness.sweep.results import scenario_label


def fmt_duration(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def result_line(entry: dict[str, Any]) -> str:
    m = entry.get("metrics") or {}
    head = f"{entry['config_id']} · {scenario_label(entry)} r{entry['repeat']}: {entry['status']}"
    if entry["status"] == "failed" and not m.get("completed"):
        return f"{head}: {entry.get('reason') or ''}".rstrip(": ")

    def f(key: str, spec: str, unit: str = "") -> str:
        v = m.get(key)
        return "-" if v is None else f"{v:{spec}}{unit}"

    parts = [
        f"goodput {f('goodput_req_per_s', '.2f')} req/s",
        f"{f('req_per_s', '.2f')} req/s",
        f"{f('output_tok_per_s', '.0f')} tok/s",
        f"TTFT p99 {f('ttft_p99_ms', '.0f', ' ms')}",
        f"ITL p99 {f('itl_p99_ms', '.1f', ' ms')}",
        f"preemptions {f('preemptions', '.0f')}",
    ]
    line = f"{head} · " + " · ".join(parts)
    if entry.get("reason"):
        line += f" ({entry['reason']})"
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
        self._status_open = False

    def _print(self, text: str) -> None:
        if not self.enabled:
            return
        if self._status_open:
            self.stream.write("\r\x1b[K")
            self._status_open = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def eta(self) -> float | None:
        left = self.total - self.done
        if left <= 0:
            return 0.0
        per_cell = sum(self.cell_times) / len(self.cell_times) if self.cell_times else self.estimate_cell_s
        if per_cell is None:
            return None
        per_start = sum(self.startup_times) / len(self.startup_times) if self.startup_times else 0.0
        starts_left = max(0, self.total_starts - self.starts)
        return left * per_cell + starts_left * per_start

    # ------------------------------------------------------------ events
    def skipped(self, n: int) -> None:
        self.done += n
        if n:
            self._print(f"resume: {n} finished cell(s) kept, {self.total - self.done} to run")

    def engine_starting(self, config_id: str, varied: dict[str, Any], argv: list[str], n_cells: int) -> None:
        self.starts += 1
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

    def engine_ready(self, startup_s: float, facts: dict[str, Any]) -> None:
        self.startup_times.append(startup_s)
        bits = [f"ready in {startup_s:.1f}s"]
        if "kv_cache_tokens" in facts:
            bits.append(f"KV cache {facts['kv_cache_tokens']:,} tokens")
        if "max_concurrency" in facts:
            bits.append(f"max concurrency {facts['max_concurrency']}x")
        self._print("  " + " · ".join(bits))

    def engine_failed(self, reason: str, tail: list[str]) -> None:
        self._print(f"  ✗ engine did not start: {reason}")
        for line in tail[-5:]:
            self._print(f"    | {line[:200]}")

    def cell_starting(self, entry_id: str, scenario: str, repeat: int) -> None:
        eta = self.eta()
        self._print(f"  [{self.done + 1}/{self.total}] {scenario} r{repeat} … (ETA {fmt_duration(eta)})")

    def cell_done(self, entry: dict[str, Any], wall_s: float | None) -> None:
        self.done += 1
        if wall_s is not None and entry["status"] != "failed":
            self.cell_times.append(wall_s)
        mark = {"complete": "✓", "partial": "~", "failed": "✗"}.get(entry["status"], "?")
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
