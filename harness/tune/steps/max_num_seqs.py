"""Step 4, max-num-seqs: size the scheduler for the expected concurrency without a preemption storm.

Candidates come from the baseline's startup log and workload (guide 001 2.1): max sequences =
KV cache tokens / average context (mean input + output tokens per request), around the expected
peak concurrency. The baseline's KV signals steer the direction: above 95% usage or frequent
preemptions, lower; requests waiting for a sequence slot with KV usage below RAISE_BELOW_KV (85%),
raise. A candidate that storms cannot win;
one that ends the incumbent's storm wins a goodput tie (the guide's first remedy).
"""

from __future__ import annotations

from typing import Any

from harness.tune.measure import Measurement, flag_of
from harness.tune.steps.base import STEPS, StepResult, fmt, label, one_flag, prologue, storm, tried_row

FLAG = "max-num-seqs"
#: requests wait for a sequence slot while KV usage stays below this: there is room to raise
RAISE_BELOW_KV = 0.85


def mean_context(m: Measurement) -> float | None:
    done = m.summary_value(lambda s: s.requests.completed)
    tin, tout = m.summary_value(lambda s: s.tokens.input_total), m.summary_value(lambda s: s.tokens.output_total)
    if not done or tin is None or tout is None:
        return None
    return (tin + tout) / done


class MaxNumSeqs:
    name = "max-num-seqs"
    summary = ("candidates from KV cache tokens / mean context (guide 001 2.1) around the expected concurrency; lower "
               f"on a storm, raise when requests wait for a sequence slot with KV below {100 * RAISE_BELOW_KV:.0f}%")

    @staticmethod
    def fit(m: Measurement) -> int | None:
        """Guide 001 2.1: the sequences the KV cache holds = KV cache tokens / mean context."""
        kv_tokens, ctx_len = m.facts.kv_cache_tokens, mean_context(m)
        return int(kv_tokens // ctx_len) if isinstance(kv_tokens, (int, float)) and ctx_len else None

    def derive(self, ctx, m: Measurement) -> tuple[list[Any], str, str]:  # type: ignore[no-untyped-def]
        flag = ctx.knob(FLAG).flag or FLAG
        kv_tokens = m.facts.kv_cache_tokens
        ctx_len = mean_context(m)
        expected = ctx.tune.load.concurrency or int(round(m.summary_value(lambda s: s.engine.running.max) or 0)) or None
        current = flag_of(ctx.current, flag)
        kv_max = m.metric("kv_usage_max")
        fit = int(kv_tokens // ctx_len) if isinstance(kv_tokens, (int, float)) and ctx_len else None
        why = (f"KV cache {kv_tokens:,} tokens / mean context {ctx_len:.0f} tokens = {fit} sequences"
               if fit is not None else "no KV capacity in the startup log")
        values: set[int] = set()
        nothing = "no value other than the current one to try"
        waiting = m.summary_value(lambda s: s.engine.waiting.mean)
        running = m.summary_value(lambda s: s.engine.running.max)
        if storm(m):  # guide: reduce it when active requests are frequently preempted
            if fit:
                values |= {max(1, fit), max(1, fit * 3 // 4)}
            elif isinstance(current, int):
                values |= {current // 2, current // 4}
            if expected and fit and expected < fit:
                values.add(expected)
        elif (waiting or 0) >= 1 and (kv_max is None or kv_max < RAISE_BELOW_KV) and self._limit_binds(running, expected, current, ctx):
            # requests wait while the KV cache has room: headroom to raise
            if expected:
                values.add(expected)
            if fit and (not isinstance(current, int) or fit > current):
                values.add(fit)
            if isinstance(current, int):
                values = {v for v in values if v > current}
        elif (waiting or 0) >= 1 and (kv_max is None or kv_max < RAISE_BELOW_KV):
            # requests wait, but not for a sequence slot: every user already ran at once, or the
            # running count stayed below the limit (they wait for the token budget or a prefill)
            nothing = (f"{fmt(running, '.0f')} sequences ran at most ({self._below(running, ctx.tune.load.concurrency, current)}) and "
                       f"{fmt(waiting, '.1f')} waited on average: they wait for the token budget or a prefill, not for a sequence slot, "
                       f"so raising max-num-seqs admits nothing; KV usage max {fmt(kv_max)}, {fmt(m.metric('preemptions'), '.0f')} preemptions")
        else:
            nothing = (f"{fmt(running, '.0f')} sequences ran at most, {fmt(waiting, '.1f')} waited on average, KV usage max {fmt(kv_max)} "
                            f"and {fmt(m.metric('preemptions'), '.0f')} preemptions: no storm to end and no waiting request to admit")
        values = {v for v in values if v >= 1 and v != current}
        return sorted(values), why, nothing

    @staticmethod
    def _limit_binds(running: float | None, expected: int | None, current: Any, ctx: Any) -> bool:
        """Whether the sequence limit is what keeps requests waiting: the running count reached
        it. Not when every one of the expected users already ran at once (a closed loop cannot send
        more), nor when the running count stayed below the current limit."""
        if running is None:
            return True
        if ctx.tune.load.concurrency is not None and expected and running >= expected:
            return False
        return not (isinstance(current, int) and running < current)

    @staticmethod
    def _below(running: float | None, users: int | None, current: Any) -> str:
        if users and running is not None and running >= users:
            return f"all {users} users at once"
        return f"below the limit {current}"

    def run(self, ctx) -> StepResult:  # type: ignore[no-untyped-def]
        done, inc = prologue(ctx, self.name, FLAG, incumbent_first=True,
                              missing="no baseline measurement to derive candidates from")
        if done is not None:
            return done
        flag = ctx.knob(FLAG).flag
        given = ctx.candidates(flag)
        values, why, nothing = (given, "the tune file's candidates", "") if given else self.derive(ctx, inc)
        if not values:
            # the formula's values are still recorded: what a grid over this flag would try
            formula = sorted({v for v in (self.fit(inc), ctx.tune.load.concurrency) if v and v != flag_of(ctx.current, flag)})
            return StepResult(self.name, "kept", f"{why}; {nothing}.", dict(ctx.current), [tried_row(inc)],
                              {"derived": why, "candidates": [], "formula": formula})
        current = flag_of(ctx.current, flag)
        cur_name = current if current is not None else "default"
        # the guide's formula first: when its value (KV tokens / mean context) ends the storm or
        # wins, the other values are not started; they run only when it does not
        fit = self.fit(inc)
        first = [fit] if not given and fit in values and len(values) > 1 else values
        rest = [v for v in values if v not in first]
        tie = lambda inc_m, cand: "ends the storm" if storm(inc_m) and not storm(cand) else None  # noqa: E731
        done, best, results = one_flag(ctx, self.name, flag, first, disqualify=storm, accept_tie_when=tie)
        if done is not None:
            return done
        skipped_note = ""
        if rest and best is None:
            done, best, more = one_flag(ctx, self.name, flag, rest, disqualify=storm, accept_tie_when=tie, suffix="-more")
            if done is not None:
                return done
            results += more[1:]
        elif rest:
            skipped_note = f" ({', '.join(map(str, rest))} not started: the formula's {fit} decided)"
        tried = [tried_row(m, j, storm=storm(m)) for _, m, j in results]
        inc_m = results[0][1]

        def desc(v: Any, m: Measurement) -> str:
            return (f"at {v if v is not None else cur_name}: goodput {fmt(m.goodput())} req/s, KV max {fmt(m.metric('kv_usage_max'))}, "
                    f"{fmt(m.metric('preemptions'), '.0f')} preemptions")

        others = "; ".join(desc(v, m) for v, m, _ in results[1:])
        inc_storm = storm(inc_m)
        head = f"{why}; " + (f"storm at {cur_name}: {inc_storm}; " if inc_storm else "")
        if best is None:
            reason = head + f"{desc(current, inc_m)}; {others}: none beats {cur_name} beyond noise"
            return StepResult(self.name, "kept", reason + ".", dict(ctx.current), tried, {"derived": why, "candidates": values})
        j = next(j for _, m, j in results if m is best)
        how = "ends the storm at equal goodput (within noise)" if j.verdict == "tie" else f"beats {cur_name} beyond noise ({j.text()})"
        ctx.current = best.flags
        reason = head + f"{desc(current, inc_m)}; {others}: {label({flag: flag_of(best.flags, flag)})} {how}{skipped_note}"
        return StepResult(self.name, "changed", reason + ".", dict(best.flags), tried, {"derived": why, "candidates": values})


STEPS.add(MaxNumSeqs.name, MaxNumSeqs())
