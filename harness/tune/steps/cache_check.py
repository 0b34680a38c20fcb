"""Step 7, cache-check: preemptions and prefix-cache hits on the repeated production prompts.

Prefix caching is on by default and the guide keeps it on unless a platform needs it off; when
the current flags turn it off, on is measured against off. When it is on, the hit rate is read
from the measurement already taken (below 5%: a real but small benefit for this traffic, guide
001 1.2); no start is spent.
"""

from __future__ import annotations

from harness.tune.measure import flag_of
from harness.tune.steps.base import STEPS, StepResult, fmt, one_flag, prologue, tried_row

FLAG = "enable-prefix-caching"
SMALL = 0.05


def _hits(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


class CacheCheck:
    name = "cache-check"
    summary = "preemptions and prefix-cache hit rate; when prefix caching is off, on vs off (no start when it is on)"

    def run(self, ctx) -> StepResult:  # type: ignore[no-untyped-def]
        done, inc = prologue(ctx, self.name, FLAG)
        if done is not None:
            return done
        flag = ctx.knob(FLAG).flag or FLAG
        pre = inc.metric("preemptions")
        pre_text = f"{fmt(pre, '.0f')} preemptions, KV usage max {fmt(inc.metric('kv_usage_max'))}"
        if flag_of(ctx.current, flag) is not False:
            hit = inc.metric("prefix_hit_rate")
            if hit is None:
                small = "the engine reports no prefix-cache hit rate"
            elif hit < SMALL:
                small = f"prefix-cache hit rate {_hits(hit)}: below 5%, the benefit is real but small for this traffic"
            else:
                small = f"prefix-cache hit rate {_hits(hit)}"
            return StepResult(self.name, "kept", f"prefix caching on; {small}; {pre_text}.", dict(ctx.current), [tried_row(inc)])
        done, best, results = one_flag(ctx, self.name, flag, [True])
        if done is not None:
            return done
        (_, off, _), (_, on, j) = results
        tried = [tried_row(m, jj) for _, m, jj in results]
        head = (f"prefix caching off: goodput {fmt(off.goodput())} req/s, TTFT p50 {fmt(off.metric('ttft_p50_ms'), '.0f')} ms, hit rate {_hits(off.metric('prefix_hit_rate'))}; "
                f"on: goodput {fmt(on.goodput())} req/s, TTFT p50 {fmt(on.metric('ttft_p50_ms'), '.0f')} ms, hit rate {_hits(on.metric('prefix_hit_rate'))}")
        hit_on = on.metric("prefix_hit_rate")
        small = " (hit rate below 5%: a small benefit)" if hit_on is not None and hit_on < SMALL else ""
        if best is None:
            return StepResult(self.name, "kept", f"{head}: on does not beat off beyond noise{small} ({j.text() if j else ''}); {pre_text}.",
                              dict(ctx.current), tried)
        ctx.current = best.flags
        return StepResult(self.name, "changed", f"{head}: on beats off beyond noise ({j.text()}){small}; {pre_text}.", dict(best.flags), tried)


STEPS.add(CacheCheck.name, CacheCheck())
