"""Step 3, baseline: the default scheduler at the expected load, warmed, with every value the
guide says to record before changing the server (TTFT, ITL, E2E, req/s, tokens/s, GPU memory,
KV occupancy and preemptions). Later steps and the final comparison are judged against it."""

from __future__ import annotations

from harness.tune.steps.base import STEPS, StepResult, fmt, tried_row


class Baseline:
    name = "baseline"
    summary = "measure the current flags at the expected load: TTFT, ITL, E2E, req/s, tok/s, GPU memory, KV usage, preemptions"

    def run(self, ctx) -> StepResult:  # type: ignore[no-untyped-def]
        m = ctx.incumbent()
        if m is None:
            ms = ctx.measure(self.name, [ctx.current])
            if ms is None:
                return ctx.budget_skip(self.name)
            m = ms[0]
        if not m.ok:
            return StepResult(self.name, "failed", f"the current flags do not give a complete run: {m.failure}", dict(ctx.current), [tried_row(m)])
        ctx.baseline = m
        r = m.row()
        text = (f"at {m.expected_level}: goodput {fmt(r['goodput_req_per_s'])} req/s ({fmt((r['goodput_fraction'] or 0) * 100, '.0f')}% within the SLOs), "
                f"{fmt(r['req_per_s'])} req/s, {fmt(r['output_tok_per_s'], '.0f')} output tok/s; TTFT p50/p99 {fmt(r['ttft_p50_ms'], '.0f')}/{fmt(r['ttft_p99_ms'], '.0f')} ms, "
                f"ITL p50/p99 {fmt(r['itl_p50_ms'], '.1f')}/{fmt(r['itl_p99_ms'], '.1f')} ms, E2E p99 {fmt(r['e2e_p99_ms'], '.0f')} ms; "
                f"KV usage max {fmt(r['kv_usage_max'])}, {fmt(r['preemptions'], '.0f')} preemptions")
        if r["gpu_memory_used_max_bytes"]:
            text += f", GPU memory {r['gpu_memory_used_max_bytes'] / 2**30:.1f} GiB"
        return StepResult(self.name, "kept", text + ".", dict(ctx.current), [tried_row(m)])


STEPS.add(Baseline.name, Baseline())
