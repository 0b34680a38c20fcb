"""What a person sees in the terminal: a progress line while running, a table at the end."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from harness.metrics.table import shown
from harness.results.models.diagnosis import MemoryBlock
from harness.results.models.summary import Dist, Quantiles, RunSummary
from harness.results.models.traffic import TtftBreakdown, TtftTail
from harness.scenario.models import Scenario


class Progress:
    """One line, rewritten in place on a TTY (a plain line every 5 s otherwise)."""

    def __init__(
        self,
        scenario: Scenario,
        enabled: bool = True,
        live: Callable[[], dict[str, Any]] | None = None,
        sink: Callable[[str], None] | None = None,
    ) -> None:
        self.sink = sink  # a sweep shows the line inside its own; the table stays off then
        self.enabled = enabled or sink is not None
        self.scenario = scenario
        self.live = live
        self.tty = sys.stderr.isatty()
        self._last_plain = 0.0
        self._last_tokens = 0
        self._last_t: float | None = None
        self._wrote = False

    def update(self, lines: list[dict[str, Any]]) -> None:
        if not self.enabled or not lines:
            return
        phase = lines[0].get("phase", "")
        elapsed = max(ln.get("elapsed_s", 0.0) for ln in lines)
        done = sum(ln.get("done", 0) for ln in lines)
        failed = sum(ln.get("failed", 0) for ln in lines)
        in_flight = sum(ln.get("in_flight", 0) for ln in lines)
        tokens = sum(ln.get("output_tokens", 0) for ln in lines)
        now = time.time()
        tok_s = 0.0
        if self._last_t is not None and now > self._last_t:
            tok_s = (tokens - self._last_tokens) / (now - self._last_t)
        self._last_t, self._last_tokens = now, tokens
        load = self.scenario.load
        if phase == "warmup":
            text = f"warming up: {sum(ln.get('warmup_done', 0) for ln in lines)} requests"
        else:
            parts = [f"{elapsed:6.1f}s"]
            if load.duration_s:
                parts.append(f"/{load.duration_s:.0f}s (ETA {max(load.duration_s - elapsed, 0):.0f}s)")
            req = f"{done}" + (f"/{load.requests}" if load.requests else "")
            parts.append(f"  req {req}  in-flight {in_flight}  out {tok_s:,.0f} tok/s  errors {failed}")
            if phase == "drain":
                parts.append("  draining")
            text = "".join(parts)
        if self.live is not None:
            try:
                live = self.live() or {}
            except Exception:
                live = {}
            if live.get("kv_usage") is not None:
                text += f"  KV {100 * live['kv_usage']:.0f}%"
            if live.get("waiting") is not None:
                text += f"  waiting {live['waiting']:.0f}"
        if self.sink is not None:
            self.sink(text)
        elif self.tty:
            sys.stderr.write("\r\033[K" + text)
            sys.stderr.flush()
            self._wrote = True
        elif now - self._last_plain >= 5:
            self._last_plain = now
            print(text, file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        if self.enabled:
            if self._wrote:
                sys.stderr.write("\n")
                self._wrote = False
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled and self.sink is None and self.tty and self._wrote:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _row(name: str, d: Dist | None, digits: int = 1) -> str:
    if d is None or d.count == 0:
        return f"  {name:<22}{'-':>10}"
    return (
        f"  {name:<22}{_fmt(d.p50, digits):>10}{_fmt(d.p90, digits):>10}{_fmt(d.p99, digits):>10}"
        f"{_fmt(d.p999, digits):>10}{_fmt(d.max, digits):>10}{_fmt(d.mean, digits):>10}"
    )


def _chosen_row(name: str, row: dict[str, Any] | None, cols: list[str], digits: int) -> str:
    if not row or not row.get("count"):
        return f"  {name:<22}{'-':>10}"
    return f"  {name:<22}" + "".join(f"{_fmt(row.get(c), digits):>10}" for c in cols)


def print_summary(
    s: RunSummary, run_dir: Path, file: TextIO | None = None, chosen: dict[str, dict[str, Any]] | None = None
) -> None:
    """`chosen`: {metric: {"p95": ms, ..., "max", "mean"}} for `--percentiles` (from the HDR histograms)."""
    out = file or sys.stdout
    w = s.window

    def p(*a: object) -> None:
        print(*a, file=out)

    p("")
    p(
        f"{s.scenario.name}  ->  {s.target.url}  model {s.target.model}"
        f"{'  (simulated engine)' if s.target.simulated else ''}"
    )
    drain = w.drain_s
    drain_text = f" (incl. {drain:.1f} s drain)" if drain >= 0.05 else ""
    p(
        f"window {w.duration_s:.1f} s{drain_text} after {w.warmup_s:.1f} s warmup; "
        f"fingerprint {s.scenario.fingerprint.value or None}; clock: {s.timing.clock} receive stamps"
    )
    off = s.load.offline
    if off:
        spread = off.submit_spread_s
        p(
            f"offline: {off.requests} requests submitted at once (on the wire within "
            f"{'-' if spread is None else f'{spread:.2f}'} s, {off.peak_in_flight} in flight at most); "
            f"makespan {off.makespan_s:.2f} s"
        )
        if off.req_per_s is not None:
            p(
                f"offline throughput: {off.req_per_s:,.2f} req/s   input {off.input_tok_per_s or 0:,.0f} tok/s   "
                f"output {off.output_tok_per_s or 0:,.0f} tok/s  (over the makespan)"
            )
    p("")
    cols = (
        [c for c in next(iter(chosen.values()), {}) if c not in ("count", "mean", "max")] + ["max", "mean"]
        if chosen
        else []
    )
    head = "latency (ms, offline)" if off else "latency (ms)"
    if chosen:
        p(f"  {head:<22}" + "".join(f"{c:>10}" for c in cols))
    else:
        p(f"  {head:<22}{'p50':>10}{'p90':>10}{'p99':>10}{'p99.9':>10}{'max':>10}{'mean':>10}")
    if off:
        p(f"  ({off.latency_label})")
    for m in shown("console"):  # harness.metrics.table
        d = s.latency_ms.get(m.name)
        if m.optional and (d is None or d.count == 0):
            continue
        p(_chosen_row(m.label, chosen.get(m.name), cols, m.digits) if chosen else _row(m.label, d, m.digits))
    r, t = s.requests, s.tokens
    p("")
    p(
        f"  requests/s {r.rps:,.2f}   completed {r.completed}   failed {r.failed}"
        + (f"  ({', '.join(f'{k} {v}' for k, v in r.errors_by_kind.items())})" if r.errors_by_kind else "")
    )
    p(
        f"  tokens/s   input {t.input_per_s:,.0f}   output {t.output_per_s:,.0f}"
        f"   (tokens per chunk mean {_fmt(s.tokens_per_chunk.mean, 2)})"
    )
    g = s.goodput.overall
    slo_set = s.scenario.slo_set
    if g.fraction is not None and slo_set:
        p(f"  goodput    {g.rps:,.2f} req/s  ({100 * g.fraction:.1f}% of requests met the SLOs)")
    e = s.engine
    kv, pre = e.kv_usage, e.preemptions
    memory_shown = False
    if kv.max is not None or pre.count is not None:
        pc, gm = e.prefix_cache, e.gpu_memory
        count = pre.count
        line = f"  engine     KV usage mean {_pct(kv.mean)} max {_pct(kv.max)}   preemptions {'-' if count is None else count}"
        if pc.hit_rate is not None:
            line += f"   prefix hit {_pct(pc.hit_rate)}"
            if pc.expected_hit_rate is not None:
                line += f" (expected {_pct(pc.expected_hit_rate)})"
        p(line)
        if gm.used_max_bytes:
            # one GPU memory line (audit N20: the diagnosis' over-the-window line repeated it)
            p(
                f"  GPU memory {gm.used_max_bytes / 2**30:,.1f} GiB used of {(gm.total_bytes or 0) / 2**30:,.1f} GiB"
                + ("  (simulated engine's model, not a measurement)" if gm.simulated else "")
                + _memory_over_window(s)
            )
            memory_shown = True
        else:  # the README promises the line; say why there is no number (audit D20)
            p(f"  GPU memory not available ({gm.reason or 'not sampled'})")
    if len(s.per_class) > 1:
        p("")
        p(
            f"  {'class':<16}{'done':>7}{'TTFT p50':>10}{'TTFT p99':>10}{'ITL p50':>9}{'ITL p99':>9}{'E2E p99':>10}{'good':>8}"
        )
        for name, c in s.per_class.items():
            lt = c.latency_ms
            gp = c.goodput.fraction if slo_set else None
            p(
                f"  {name:<16}{c.requests.completed:>7}{_fmt(_g(lt, 'ttft', 'p50')):>10}{_fmt(_g(lt, 'ttft', 'p99')):>10}"
                f"{_fmt(_g(lt, 'itl_token', 'p50'), 2):>9}{_fmt(_g(lt, 'itl_token', 'p99'), 2):>9}"
                f"{_fmt(_g(lt, 'e2e', 'p99')):>10}{('-' if gp is None else f'{100 * gp:.0f}%'):>8}"
            )
    sess = s.sessions
    if sess:
        p(
            f"  sessions   {sess.started} started, {sess.completed} completed, {sess.cut} cut   "
            f"duration p50 {_fmt(sess.duration_s.p50)} s   prefix hit ideal {_pct(sess.ideal_prefix_hit_rate)}, "
            f"engine {_pct(sess.engine_prefix_hit_rate)}"
        )
    cache, parts = s.cache, s.ttft_breakdown
    if cache is not None and cache.requests_reporting:
        ideal = f", ideal {_pct(cache.ideal_hit_rate)}" if cache.ideal_hit_rate is not None else ""
        p(f"  cache      prefix hit (usage) {_pct(cache.hit_rate)} of {cache.prompt_tokens:,} prompt tokens{ideal}")
    if parts is not None and parts.requests and parts.tail is not None:
        keys = ("send_lag", "network", "queue", "prefill") if s.load.mode == "open" else ("network", "queue", "prefill")

        def split(b: TtftBreakdown | TtftTail) -> str:
            return " ".join(f"{k.replace('_', ' ')} {_pct(getattr(b.share, k))}" for k in keys)

        p(
            f"  TTFT split mean {split(parts)} · p99 tail {split(parts.tail)}  (server timing, {parts.requests} requests)"
        )
    elif s.server_timing is not None and not s.server_timing.timed and s.requests.completed:
        p("  TTFT split not known: the server returned no per-request timing (vLLM: --enable-per-request-metrics)")
    fleet = s.fleet
    if fleet:
        p(
            f"  fleet      {len(fleet.endpoints)} endpoints, routing {fleet.routing}, sent {fleet.sent}   "
            f"prefix overlap across replicas {_pct(fleet.prefix_overlap)}   prefix hit (usage) {_pct(fleet.fleet_usage_cached_hit_rate)}"
        )
        for rep in fleet.engines or []:
            wt = rep.waiting
            p(
                f"    {rep.endpoint}: waiting mean {_fmt(wt.mean if wt else None)} max {_fmt(wt.max if wt else None, 0)}   "
                f"prefix hit {_pct(rep.prefix_hit_rate)}"
            )
    for dim, blocks in (s.groups or {}).items():
        # the same table for every grouping (turn, adapter, endpoint): one row per value
        p("")
        p(
            f"  {dim:<16}{'done':>7}{'in tok':>8}{'TTFT p50':>10}{'TTFT p99':>10}{'ITL p50':>9}{'E2E p99':>10}{'good':>8}"
        )
        for value, grp in blocks.items():
            glt, done = grp.latency_ms, grp.requests.completed
            gp = grp.goodput.fraction
            mean_in = grp.tokens.input_total / done if done else None
            p(
                f"  {value:<16}{done:>7}{_fmt(mean_in, 0):>8}{_fmt(_g(glt, 'ttft', 'p50')):>10}{_fmt(_g(glt, 'ttft', 'p99')):>10}"
                f"{_fmt(_g(glt, 'itl_token', 'p50'), 2):>9}{_fmt(_g(glt, 'e2e', 'p99')):>10}{('-' if gp is None else f'{100 * gp:.0f}%'):>8}"
            )
    mem = s.diagnosis.memory
    if isinstance(mem, MemoryBlock) and mem.growth_gib is not None and not memory_shown:
        sim = " (simulated)" if mem.source == "simulated" else ""
        p(f"  GPU memory{sim}" + _memory_over_window(s).removeprefix(";"))
    if s.findings:
        p("")
        for i, f in enumerate(s.findings[:3], 1):
            p(f"  FINDING {i}: {f.text}")
            if f.advice:
                p(f"             -> {f.advice}")
    warnings = s.validity.warnings
    if warnings:
        p("")
        for wtext in warnings:
            p(f"  WARNING: {wtext}")
    p("")
    p(f"results: {run_dir}")


def _memory_over_window(s: RunSummary) -> str:
    """'; 73.60 -> 73.60 GiB over the window (peak 73.60, 6.40 GiB left)' from the memory
    diagnosis, or '' when there is none."""
    mem = s.diagnosis.memory
    if not isinstance(mem, MemoryBlock) or mem.growth_gib is None:
        return ""
    margin = f", {mem.margin_gib:,.2f} GiB left" if mem.margin_gib is not None else ""
    return (
        f"; {mem.start_gib or 0:,.2f} -> {mem.end_gib or 0:,.2f} GiB over the window "
        f"(peak {mem.peak_gib or 0:,.2f}{margin})"
    )


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _g(lat: Mapping[str, Quantiles], key: str, field: str) -> float | None:
    d = lat.get(key)
    return getattr(d, field) if d is not None else None
