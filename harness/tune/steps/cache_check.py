"""Step 7, cache-check: preemptions and prefix-cache hits on the repeated production prompts.

Objective (guide 000 "Use prefix caching", guide 001 1.2): prefix caching saves prefill work, so
it is judged on TTFT p50 and p99, with the prefill work saved (the engine's hit rate, with its
interval over time slices, and the prompt tokens it still computed per request) beside them;
goodput is the guard. Prior: it is enabled by default and the guide keeps it enabled "unless the
target platform or a specific feature requires it to be disabled", so when the current flags
turn it off, on is taken unless it is worse beyond noise; keeping it off needs evidence that on
is worse. When it is on, the hit rate is read from the measurement already taken (below 5%: a
real but small benefit for this traffic, guide 001 1.2); no start is spent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.compare import Options
from harness.compare.metrics import METRICS
from harness.compare.noise import engine_interval
from harness.report.data import load_run
from harness.tune.judge import Objective
from harness.tune.measure import Measurement
from harness.tune.steps.base import STEPS, StepResult, fmt, one_flag, prologue, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

FLAG = "enable-prefix-caching"
SMALL = 0.05
OBJECTIVE = Objective(targets=("ttft.p50", "ttft.p99"))


def _hits(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def prefill_per_request(m: Measurement) -> float | None:
    """Prompt tokens the engine computed per completed request: its prompt tokens minus those
    served from the prefix cache (the prefill work prefix caching saves)."""
    prompt, hits = (
        m.summary_value(lambda s: s.engine.prompt_tokens),
        m.summary_value(lambda s: s.engine.prefix_cache.hits),
    )
    done = m.summary_value(lambda s: s.requests.completed)
    if prompt is None or not done:
        return None
    return (prompt - (hits or 0.0)) / done


def hit_rate(m: Measurement) -> str:
    """The engine's prefix-cache hit rate with its interval over time slices of its counters."""
    parts = []
    for s in m.scenarios:
        iv = engine_interval(METRICS["prefix_hit_rate"], [load_run(p) for p in m.run_dirs(s)], Options())
        where = f"{s}: " if len(m.scenarios) > 1 else ""
        if iv is None:
            v = m.metric("prefix_hit_rate", s)
            parts.append(where + (_hits(v) if v is not None else "not reported"))
        else:
            parts.append(where + f"{iv[0]:.0f}% (95% interval [{iv[1]:.0f}, {iv[2]:.0f}]%)")
    return "; ".join(parts)


class CacheCheck:
    name = "cache-check"
    knobs = (FLAG,)  # the guide knobs it moves (the plan shows each kind's spelling)
    summary = (
        "preemptions and prefix-cache hit rate; when prefix caching is off, on vs off on TTFT p50/p99 and prefill work "
        "saved, on taken unless worse beyond noise (the guide keeps it on); no start when it is on"
    )

    def run(self, ctx: TuneContext) -> StepResult:
        done, inc = prologue(ctx, self.name, FLAG)
        if done is not None:
            return done
        assert inc is not None  # prologue hands the incumbent back when every check passed
        knob = ctx.knob(FLAG)  # the kind's switch and its sense (SGLang: on without --disable-radix-cache)
        flag = knob.flag or FLAG
        pre = inc.metric("preemptions")
        pre_text = f"{fmt(pre, '.0f')} preemptions, KV usage max {fmt(inc.metric('kv_usage_max'))}"
        if knob.is_on(knob.value(ctx.current)) is not False:
            hit = inc.metric("prefix_hit_rate")
            if hit is None:
                small = "the engine reports no prefix-cache hit rate"
            elif hit < SMALL:
                small = f"prefix-cache hit rate {_hits(hit)}: below 5%, the benefit is real but small for this traffic"
            else:
                small = f"prefix-cache hit rate {_hits(hit)}"
            return StepResult(
                self.name, "kept", f"prefix caching on; {small}; {pre_text}.", dict(ctx.current), [tried_row(inc)]
            )
        done, best, results = one_flag(
            ctx, self.name, flag, [knob.on], objective=OBJECTIVE, prior=lambda _v: "candidate"
        )
        if done is not None:
            return done
        (_, off, _), (_, on, j) = results
        tried = [tried_row(m, jj) for _, m, jj in results]
        work = (
            f"prefix-cache hit rate {hit_rate(off)} -> {hit_rate(on)}; prompt tokens computed per request "
            f"{fmt(prefill_per_request(off), '.0f')} -> {fmt(prefill_per_request(on), '.0f')}"
        )
        hit_on = on.metric("prefix_hit_rate")
        small = (
            " (hit rate below 5%: a small benefit for this traffic)" if hit_on is not None and hit_on < SMALL else ""
        )
        rule = "the guide keeps prefix caching enabled unless the platform or a feature needs it off"
        assert j is not None
        if best is None:
            return StepResult(
                self.name,
                "kept",
                f"prefix caching off -> on: {j.text()}; {work}{small}. Kept off: on is worse "
                f"beyond noise, the evidence that overrides the default ({rule}); {pre_text}.",
                dict(ctx.current),
                tried,
            )
        ctx.current = best.flags
        return StepResult(
            self.name,
            "changed",
            f"prefix caching off -> on: {j.text()}; {work}{small}. Turned on: {rule}, "
            f"and on is not worse beyond noise; {pre_text}.",
            dict(best.flags),
            tried,
        )


STEPS.add(CacheCheck.name, CacheCheck())
