"""Step 3, baseline: the default scheduler at the expected load, warmed, with every value the
guide says to record before changing the server (TTFT, ITL, E2E, req/s, tokens/s, GPU memory,
KV occupancy and preemptions). Later steps and the final comparison are judged against it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.tune.judge import THROUGHPUT, guard_key
from harness.tune.measure import Measurement
from harness.tune.steps.base import STEPS, StepResult, fmt, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext


class Baseline:
    name = "baseline"
    summary = "measure the current flags at the expected load: TTFT, ITL, E2E, req/s, tok/s, GPU memory, KV usage, preemptions"

    def run(self, ctx: TuneContext) -> StepResult:
        m = ctx.incumbent()
        if m is None:
            ms = ctx.measure(self.name, [ctx.current])
            if ms is None:
                return ctx.budget_skip(self.name)
            m = ms[0]
        if not m.ok:
            return StepResult(
                self.name,
                "failed",
                f"the current flags do not give a complete run: {m.failure_kind()}: {m.failure}",
                dict(ctx.current),
                [tried_row(m)],
            )
        ctx.baseline = m
        r = m.row()
        no_slo = guard_key(m) == THROUGHPUT
        good = (
            "no SLO in the tune file or the scenarios: goodput is plain throughput, and the latency steps are judged on "
            "their latency metrics; "
            if no_slo
            else f"goodput {fmt(r['goodput_req_per_s'])} req/s ({fmt((r['goodput_fraction'] or 0) * 100, '.0f')}% within the SLOs), "
        )
        text = (
            f"at {m.expected_level}: {good}"
            f"{fmt(r['req_per_s'])} req/s, {fmt(r['output_tok_per_s'], '.0f')} output tok/s; TTFT p50/p99 {fmt(r['ttft_p50_ms'], '.0f')}/{fmt(r['ttft_p99_ms'], '.0f')} ms, "
            f"ITL p50/p99 {fmt(r['itl_p50_ms'], '.1f')}/{fmt(r['itl_p99_ms'], '.1f')} ms, TPOT p50 {fmt(tpot_p50(m), '.1f')} ms, "
            f"E2E p99 {fmt(r['e2e_p99_ms'], '.0f')} ms; "
            f"KV usage max {fmt(r['kv_usage_max'])}, {fmt(r['preemptions'], '.0f')} preemptions"
        )
        if r["gpu_memory_used_max_bytes"]:
            text += f", GPU memory {r['gpu_memory_used_max_bytes'] / 2**30:.1f} GiB"
        text += "." + short_window(m, ctx.tune.measure.duration_s)
        return StepResult(self.name, "kept", text, dict(ctx.current), [tried_row(m)])


def tpot_p50(m: Measurement) -> float | None:
    return m.summary_value(lambda s: s.latency_ms["tpot"].p50 if "tpot" in s.latency_ms else None)


#: fewer completed requests than this in a window make goodput intervals wide
FEW = 30


def short_window(m: Measurement, duration_s: float) -> str:
    """A note when the measure window is short for these requests: a median request longer than
    half the window, or fewer than 30 completions in it, leave goodput so coarse that real
    differences end as ties (seen on the H200: eager requests of 16-21 s in a 12-s window)."""
    bits = []
    for s in m.scenarios:
        e2e, done = m.metric("e2e_p50_ms", s), m.metric("completed", s)
        if e2e is not None and e2e / 1000.0 > duration_s / 2:
            bits.append(f"{s}: median request {e2e / 1000.0:.1f} s in a {duration_s:g}-s window")
        elif done is not None and done < FEW:
            bits.append(f"{s}: {done:.0f} requests completed in the window")
    if not bits:
        return ""
    return (
        f" Note: the window is short for this traffic ({'; '.join(bits)}): goodput differences will be coarse and "
        "may end as ties; raise measure.duration_s."
    )


STEPS.add(Baseline.name, Baseline())
