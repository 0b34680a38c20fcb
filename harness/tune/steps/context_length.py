"""Step 1, context-length: set --max-model-len to the length the service needs.

An explicit limit keeps one request from reserving context the service never uses (guide 000).
The first start with it is also the baseline's start; its log says whether the length fits
(`Maximum concurrency for N tokens per request`), and a start that fails because it does not
fit is reported with the log's root-cause line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.tune.measure import flag_of, merged
from harness.tune.steps.base import STEPS, StepResult, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

FLAG = "max-model-len"
_NO_FIT = ("max_model_len", "max seq len", "KV cache is needed", "maximum model length")


class ContextLength:
    name = "context-length"
    knobs = (FLAG,)  # the guide knobs it moves (the plan shows each kind's spelling)
    summary = (
        "set max-model-len to the required context length; report when the startup log reduces it or the start fails"
    )

    def run(self, ctx: TuneContext) -> StepResult:
        required = ctx.spec.max_model_len
        flag = ctx.knob(FLAG).flag
        if flag is None:  # the kind has no such limit: nothing to set; the next step's start is the first
            lacks = ctx.lacks(self.name, FLAG)
            assert lacks is not None  # the kind has no such flag
            lacks.reason = (
                lacks.reason[:-1]
                + f"; the workload needs {required} tokens per request ({ctx.spec.max_model_len_from})."
            )
            return lacks
        before = flag_of(ctx.current, flag)
        flags = merged(ctx.current, {flag: required})
        ms = ctx.measure(self.name, [flags])
        if ms is None:
            return ctx.budget_skip(self.name)
        (m,) = ms
        # the kind's spelling when it is not the guide's (llama.cpp: --kv-unified-per-slot, SGLang: --context-length)
        where = (
            f"{required} tokens ({ctx.spec.max_model_len_from})"
            if flag == FLAG
            else f"{required} tokens (--{flag}; {ctx.spec.max_model_len_from})"
        )
        if not m.started or not m.ok:
            why = m.failure or "the engine did not start"
            if any(s in why for s in _NO_FIT):
                return StepResult(
                    self.name,
                    "failed",
                    f"max-model-len {where}: startup fails because it does not fit: {why}",
                    flags,
                    [tried_row(m)],
                )
            # another cause (memory budget, a bad flag): the gpu-memory step starts it with this
            # length. Not 'changed': nothing with it was measured, and the tune's final flags
            # drop it unless a later start with it succeeds (harness.tune.driver final_flags)
            ctx.current = flags
            return StepResult(
                self.name,
                "kept",
                f"max-model-len {where} is not measured yet: the engine did not start ({why}); "
                "the gpu-memory step starts it with this length, and the length is recommended only once a "
                "start with it succeeds",
                flags,
                [tried_row(m)],
            )
        facts = m.facts
        bits = [f"max-model-len {where}" + (f" (was {before})" if before is not None and before != required else "")]
        if facts.max_concurrency is not None:
            fits_for = facts.max_concurrency_for_tokens if facts.max_concurrency_for_tokens is not None else required
            bits.append(
                f"the startup log fits {facts.max_concurrency}x requests of {fits_for} tokens "
                f"in a KV cache of {facts.kv_cache_tokens:,} tokens"
                if isinstance(facts.kv_cache_tokens, int)
                else f"the startup log fits {facts.max_concurrency}x requests of that length"
            )
        reported = facts.max_concurrency_for_tokens
        if isinstance(reported, int) and reported < required:
            bits.append(
                f"automatic fitting reduced the length to {reported}: requests longer than that will be refused"
            )
        ctx.current = flags
        verdict = "changed" if before != required else "kept"
        return StepResult(self.name, verdict, "; ".join(bits) + ".", flags, [tried_row(m)])


STEPS.add(ContextLength.name, ContextLength())
