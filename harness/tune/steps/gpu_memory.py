"""Step 2, gpu-memory: a gpu-memory-utilization at which the engine starts, with headroom.

The fraction applies to the GPU's whole memory, not to what is free (guide 000): another process
holding memory makes the default fail. A start that fails is a result (the log's root-cause
line); lower fractions are tried, highest first, until one starts. A fraction whose engine
started and whose run then failed (a length check, a crash mid-run) is not a failed start: the
step says which happened, with the run's error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.results.run_metrics import BY_NAME as RUN
from harness.tune.measure import flag_of, merged
from harness.tune.steps.base import STEPS, StepResult, _or, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

FLAG = "gpu-memory-utilization"
DEFAULT = 0.92
#: the fractions tried after a memory failure, highest first (the plan's text says these: audit N15)
FALLBACK_FRACTIONS = (0.85, 0.75, 0.6, 0.5)
_MEMORY = ("memory utilization", "Free memory on device", "out of memory", "No available memory for the cache blocks")


class GpuMemory:
    name = "gpu-memory"
    knobs = (FLAG,)  # the guide knobs it moves (the plan shows each kind's spelling)
    without_knob = "the step only checks that the engine starts"
    summary = (
        "keep gpu-memory-utilization if the engine starts; on a memory failure try lower fractions "
        f"({', '.join(map(str, FALLBACK_FRACTIONS))}) until one starts"
    )

    def run(self, ctx: TuneContext) -> StepResult:
        m = ctx.incumbent()
        knob = ctx.knob(FLAG)
        flag = knob.flag or FLAG
        # the kind's default fraction; None where the engine computes it at start (SGLang)
        default = knob.default if knob.flag is not None else DEFAULT
        current = flag_of(ctx.current, flag)
        shown = (
            current
            if current is not None
            else (f"{default} (default)" if default is not None else "the engine's default")
        )
        if m is None:
            ms = ctx.measure(self.name, [ctx.current])
            if ms is None:
                return ctx.budget_skip(self.name)
            m = ms[0]
        if m.ok:
            facts = m.facts
            kv = facts.kv_cache_gib
            used = m.summary_value(RUN["gpu_memory_used_max_bytes"].get)
            total = m.summary_value(lambda s: s.engine.gpu_memory.total_bytes)
            head = ""
            if used and total:
                head = f"; GPU memory used max {used / 2**30:.1f} of {total / 2**30:.1f} GiB ({100 * (1 - used / total):.0f}% headroom)"
            tokens = facts.kv_cache_tokens
            kvtxt = (
                f", KV cache {kv} GiB / {tokens if tokens is not None else '?'} tokens"
                if kv is not None
                else (f", KV cache {tokens:,} tokens" if isinstance(tokens, int) else "")
            )
            at = (
                f"at {flag} {shown}"
                if knob.flag is not None
                else f"(engine kind {ctx.tune.engine.kind} has no memory fraction: {knob.why_missing})"
            )
            return StepResult(
                self.name, "kept", f"the engine starts {at}{kvtxt}{head}.", dict(ctx.current), [tried_row(m)]
            )
        why = m.failure or "did not start"
        if m.started and m.failure_kind() != "the engine did not start":
            return StepResult(
                self.name,
                "failed",
                f"at {flag} {shown} {m.failure_kind()}: {why} (a failed run, not a failed start: "
                "the memory budget is not what failed)",
                dict(ctx.current),
                [tried_row(m)],
            )
        if knob.flag is None:
            return StepResult(
                self.name,
                "failed",
                f"the engine does not start ({why}) and engine kind {ctx.tune.engine.kind} "
                f"has no memory-fraction flag to lower: {knob.why_missing}",
                dict(ctx.current),
                [tried_row(m)],
            )
        if not any(s.lower() in why.lower() for s in _MEMORY):
            return StepResult(
                self.name,
                "failed",
                f"the engine does not start, not for memory: {why}",
                dict(ctx.current),
                [tried_row(m)],
            )
        start = float(current) if isinstance(current, (int, float)) else default if default is not None else 1.0
        values = ctx.candidates(flag) or [v for v in FALLBACK_FRACTIONS if v < start]
        tried = [tried_row(m)]
        outcomes: list[str] = []
        for v in sorted(values, reverse=True):
            flags = merged(ctx.current, {flag: v})
            ms = ctx.measure(self.name, [flags], suffix=f"-{v:g}")
            if ms is None:
                return StepResult(
                    self.name,
                    "failed",
                    f"{shown} does not start ({why}); {ctx._budget_reason}",
                    dict(ctx.current),
                    tried,
                )
            tried.append(tried_row(ms[0]))
            if ms[0].ok:
                ctx.current = flags
                return StepResult(
                    self.name,
                    "changed",
                    f"{shown} does not start ({why}); {v:g} starts, KV cache {_or(ms[0].facts.kv_cache_tokens)} tokens.",
                    flags,
                    tried,
                )
            outcomes.append(f"{v:g}: {ms[0].failure_kind()} ({ms[0].failure or 'no reason recorded'})")
            if ms[0].started and ms[0].failure_kind() != "the engine did not start":
                ctx.current = flags  # it starts: the memory budget is found, the run's failure is another matter
                return StepResult(
                    self.name,
                    "failed",
                    f"{shown} does not start ({why}); {'; '.join(outcomes)}: the memory budget "
                    f"{v:g} starts the engine, but its run failed.",
                    flags,
                    tried,
                )
        return StepResult(
            self.name,
            "failed",
            f"no fraction starts the engine: at {shown}: {why}; {'; '.join(outcomes)}",
            dict(ctx.current),
            tried,
        )


STEPS.add(GpuMemory.name, GpuMemory())
