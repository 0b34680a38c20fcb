"""Step 9, parallelism: only when the model does not fit or one replica is too slow, and only
with the GPUs to try it. TP widths come from `candidates` (tensor-parallel-size); otherwise the
step is skipped with why: adding GPUs only to raise the reported batch capacity is what the
guide warns against."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.tune.measure import flag_of
from harness.tune.steps.base import STEPS, StepResult, _or, fmt, one_flag, prologue, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

FLAG = "tensor-parallel-size"


class Parallelism:
    name = "parallelism"
    knobs = (FLAG,)  # the guide knobs it moves (the plan shows each kind's spelling)
    summary = "only when the model does not fit or one replica misses the SLOs at the expected load, with gpus > 1 and tensor-parallel-size candidates"

    def run(self, ctx: TuneContext) -> StepResult:
        done, inc = prologue(ctx, self.name, FLAG)
        if done is not None:
            return done
        assert inc is not None  # prologue hands the incumbent back when every check passed
        frac = inc.metric("goodput_fraction")
        need = ctx.tune.slo_attainment
        fits = f"the model fits (KV cache {_or(inc.facts.kv_cache_tokens)} tokens)"
        if frac is None or frac >= need:
            return StepResult(
                self.name,
                "skipped",
                f"{fits} and one replica keeps {fmt((frac or 0) * 100, '.0f')}% of requests within the SLOs "
                f"at {inc.expected_level} (needs {need * 100:g}%): not too slow.",
                dict(ctx.current),
                [tried_row(inc)],
            )
        flag = ctx.knob(FLAG).flag or FLAG  # the kind's spelling (SGLang --tp-size, TGI --num-shard)
        values = [v for v in (ctx.candidates(flag) or []) if isinstance(v, int) and v <= ctx.tune.gpus]
        if ctx.tune.gpus < 2 or not values:
            return StepResult(
                self.name,
                "skipped",
                f"one replica keeps only {fmt(frac * 100, '.0f')}% within the SLOs (needs {need * 100:g}%), "
                f"but there {'is 1 GPU' if ctx.tune.gpus < 2 else 'are no tensor-parallel-size candidates'} to try.",
                dict(ctx.current),
                [tried_row(inc)],
            )
        done, best, results = one_flag(ctx, self.name, flag, values)
        if done is not None:
            return done
        tried = [tried_row(m, j) for _, m, j in results]
        if best is None:
            return StepResult(
                self.name,
                "kept",
                f"one replica keeps {fmt(frac * 100, '.0f')}% within the SLOs; no width beats it beyond noise.",
                dict(ctx.current),
                tried,
            )
        ctx.current = best.flags
        return StepResult(
            self.name,
            "changed",
            f"one replica keeps {fmt(frac * 100, '.0f')}% within the SLOs; TP {flag_of(best.flags, flag)} beats it beyond noise.",
            dict(best.flags),
            tried,
        )


STEPS.add(Parallelism.name, Parallelism())
