"""Step 5, cuda-graphs: when the current flags run eager, CUDA graphs on vs off.

Objective (guide 001 2.2, guide 000 "Select compilation behavior"): steady-state ITL (TPOT p50,
the median request's time per token, and ITL p99) and GPU memory against startup time. Graph capture removes the per-step launch overhead
(decode steps 10-20% faster) and costs graph-pool memory; eager mode saves startup work and
"usually lowers steady-state performance. Do not use it as a production default without a
benchmark." Prior: graphs are the engines' default (vLLM's hybrid execution), so graphs on is
taken unless it is worse beyond noise on ITL or goodput; staying eager needs that evidence
(startup time alone is not a reason, guide 000). When the current flags turn graphs off (vLLM
`enforce-eager: true`, transformers `cb-use-cuda-graph: false`) or leave an engine's automatic
choice in place, graphs on is measured against them, and the reason gives both sides of the
trade: the startup each took, the steady-state ITL, goodput and GPU memory. When graphs are
already on, nothing is started.

It comes before the token-budget step (guide 001 puts chunked prefill first): eager execution
pays the launch overhead on every step, which lifts ITL p50 towards p99 and hides the decode
stalls that step looks for, so the execution mode is settled first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.results.run_metrics import BY_NAME as RUN
from harness.tune.judge import Objective
from harness.tune.measure import Measurement, flag_of
from harness.tune.steps.base import STEPS, StepResult, fmt, one_flag, prologue, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

KNOB = "cuda-graphs"
#: steady-state decode: the median request's time per token (TPOT p50) and the ITL tail
OBJECTIVE = Objective(targets=("tpot.p50", "itl.p99"))


def startup_s(m: Measurement) -> float | None:
    vals = [float(e.startup_s) for e in m.entries if e.startup_s is not None]
    return min(vals) if vals else None


def _gib(m: Measurement) -> str:
    b = m.summary_value(RUN["gpu_memory_used_max_bytes"].get)
    return f", GPU memory {b / 2**30:.1f} GiB" if b else ""


def show(flag: str, value: Any) -> str:
    return f"{flag} {str(value).lower() if isinstance(value, bool) else value}"


def describe(name: str, m: Measurement) -> str:
    return (
        f"{name}: startup {fmt(startup_s(m), '.1f')} s, goodput {fmt(m.goodput())} req/s, "
        f"{fmt(m.metric('output_tok_per_s'), '.0f')} output tok/s, ITL p50/p99 {fmt(m.metric('itl_p50_ms'), '.1f')}/"
        f"{fmt(m.metric('itl_p99_ms'), '.1f')} ms{_gib(m)}"
    )


class CudaGraphs:
    name = "cuda-graphs"
    knobs = (KNOB,)  # the guide knobs it moves (the plan shows each kind's spelling)
    summary = (
        "when the current flags run eager or leave graphs to the engine: CUDA graphs on vs the current flags "
        "(startup saved vs steady-state lost); no start when graphs are on"
    )

    def run(self, ctx: TuneContext) -> StepResult:
        done, inc = prologue(ctx, self.name, KNOB)
        if done is not None:
            return done
        assert inc is not None  # prologue hands the incumbent back when every check passed
        knob = ctx.knob(KNOB)
        flag = knob.flag
        assert flag is not None  # prologue skipped a kind without it
        current = flag_of(ctx.current, flag)
        if current is None and knob.default_on:
            return StepResult(
                self.name,
                "kept",
                f"CUDA graphs are on (the engine's default; {flag} not set); nothing to try.",
                dict(ctx.current),
                [tried_row(inc)],
            )
        if current is not None and knob.is_on(current):  # the kind's sense (an env value "1" is 1)
            return StepResult(
                self.name,
                "kept",
                f"CUDA graphs are on ({show(flag, current)}); nothing to try.",
                dict(ctx.current),
                [tried_row(inc)],
            )
        done, best, results = one_flag(
            ctx, self.name, flag, [knob.on], objective=OBJECTIVE, prior=lambda _v: "candidate"
        )
        if done is not None:
            return done
        (_, off, _), (_, on, j) = results
        tried = [tried_row(m, jj, startup_s=startup_s(m)) for _, m, jj in results]
        cur_name = show(flag, current) if current is not None else f"{flag} unset (the engine's choice)"
        on_name = show(flag, knob.on) if knob.on is not None else f"without {flag}"
        head = f"{describe(cur_name, off)}; {describe(on_name, on)}"
        saved: float | None = None
        on_s, off_s = startup_s(on), startup_s(off)
        if on_s is not None and off_s is not None:
            saved = on_s - off_s
        # guide 000's trade: what eager saves at startup against what it loses in steady state
        trade = (
            f"; startup with graphs {saved:+.1f} s vs eager (a one-time cost per start)" if saved is not None else ""
        )
        rule = "graphs are the engine's default and guide 000 keeps eager out of production without a benchmark"
        assert j is not None
        if best is None:
            return StepResult(
                self.name,
                "kept",
                f"{head}: {j.text()}{trade}. Kept eager: graphs on is worse beyond noise, "
                f"the evidence that overrides the default ({rule}).",
                dict(ctx.current),
                tried,
            )
        ctx.current = best.flags
        return StepResult(
            self.name,
            "changed",
            f"{head}: {j.text()}{trade}. Graphs on: {rule}, and graphs on is not worse beyond noise.",
            dict(best.flags),
            tried,
        )


STEPS.add(CudaGraphs.name, CudaGraphs())
