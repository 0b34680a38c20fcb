"""Step 4, max-num-seqs: size the scheduler for the expected concurrency without a preemption storm.

Objective (guide 000 "Size the scheduler" and "Understand KV cache pressure", guide 001 2.1):
preemptions, KV occupancy (steady state below RAISE_BELOW_KV, 85%) and goodput. Candidates come
from the baseline's startup log and workload: max sequences = KV cache tokens / average context
(mean input + output tokens per request), around the expected peak concurrency. The baseline's
KV signals steer the direction: on a storm (above 95% usage with preemptions, or a preemption per
ten requests) lower, the guide's first remedy: a lower value is taken when it has fewer
preemptions beyond noise (or more goodput) and no goodput loss beyond noise; a candidate that
still storms cannot win, one that ends the storm wins a goodput tie. When requests wait for a
sequence slot while the KV cache has room, raise: a higher value is taken for goodput or TTFT
better beyond noise, if its steady-state KV occupancy (mean) stays below 85%.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.tune.judge import Objective
from harness.tune.measure import Measurement, flag_of
from harness.tune.steps.base import STEPS, StepResult, fmt, label, one_flag, prologue, storm, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

FLAG = "max-num-seqs"
#: requests wait for a sequence slot while KV usage stays below this: there is room to raise
RAISE_BELOW_KV = 0.85
LOWER = Objective(targets=("preemptions",))
RAISE = Objective(targets=("ttft.p50", "ttft.p99", "preemptions"))


def kv_full(m: Measurement) -> str | None:
    """Steady-state KV occupancy at or above 85% (guide 001 2.1): no room for the burst."""
    mean = m.summary_value(lambda s: s.engine.kv_usage.mean)
    return (
        f"steady-state KV usage {mean:.0%} ({100 * RAISE_BELOW_KV:.0f}% or more)"
        if mean is not None and mean >= RAISE_BELOW_KV
        else None
    )


def mean_context(m: Measurement) -> float | None:
    done = m.summary_value(lambda s: s.requests.completed)
    tin, tout = m.summary_value(lambda s: s.tokens.input_total), m.summary_value(lambda s: s.tokens.output_total)
    if not done or tin is None or tout is None:
        return None
    return (tin + tout) / done


class MaxNumSeqs:
    name = "max-num-seqs"
    knobs = (FLAG,)  # the guide knobs it moves (the plan shows each kind's spelling)
    summary = (
        "candidates from KV cache tokens / mean context (guide 001 2.1) around the expected concurrency; lower "
        f"on a storm, raise when requests wait for a sequence slot with KV below {100 * RAISE_BELOW_KV:.0f}%"
    )

    @staticmethod
    def fit(m: Measurement) -> int | None:
        """Guide 001 2.1: the sequences the KV cache holds = KV cache tokens / mean context."""
        kv_tokens, ctx_len = m.facts.kv_cache_tokens, mean_context(m)
        return int(kv_tokens // ctx_len) if isinstance(kv_tokens, (int, float)) and ctx_len else None

    def derive(self, ctx: TuneContext, m: Measurement) -> tuple[list[Any], str, str]:
        flag = ctx.knob(FLAG).flag or FLAG
        kv_tokens = m.facts.kv_cache_tokens
        ctx_len = mean_context(m)
        expected = ctx.tune.load.concurrency or round(m.summary_value(lambda s: s.engine.running.max) or 0) or None
        current = flag_of(ctx.current, flag)
        kv_max = m.metric("kv_usage_max")
        fit = int(kv_tokens // ctx_len) if isinstance(kv_tokens, (int, float)) and ctx_len else None
        why = (
            f"KV cache {kv_tokens:,} tokens / mean context {ctx_len:.0f} tokens = {fit} sequences"
            if fit is not None
            else "no KV capacity in the startup log"
        )
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
        elif (
            (waiting or 0) >= 1
            and (kv_max is None or kv_max < RAISE_BELOW_KV)
            and self._limit_binds(running, expected, current, ctx)
        ):
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
            nothing = (
                f"{fmt(running, '.0f')} sequences ran at most ({self._below(running, ctx.tune.load.concurrency, current, ctx)}) and "
                f"{fmt(waiting, '.1f')} waited on average: they wait for the token budget or a prefill, not for a sequence slot, "
                f"so raising max-num-seqs admits nothing; KV usage max {fmt(kv_max)}, {fmt(m.metric('preemptions'), '.0f')} preemptions"
            )
        else:
            nothing = (
                f"{fmt(running, '.0f')} sequences ran at most, {fmt(waiting, '.1f')} waited on average, KV usage max {fmt(kv_max)} "
                f"and {fmt(m.metric('preemptions'), '.0f')} preemptions: no storm to end and no waiting request to admit"
            )
        values = {v for v in values if v >= 1 and v != current}
        return sorted(values), why, nothing

    @staticmethod
    def _limit(current: Any, ctx: Any) -> int | None:
        """The sequence limit in force: the flag when set, else the engine's default (vLLM: 128 or more),
        which like vLLM's own default is never above an explicit token budget (every running
        sequence takes a token of each step). None when the kind computes its default at start."""
        limit = current if isinstance(current, int) and current > 0 else None
        if limit is None:
            default = ctx.knob(FLAG).default
            if not (isinstance(default, int) and default > 0):
                return None
            limit = default
            budget_flag = ctx.knob("max-num-batched-tokens").flag
            budget = flag_of(ctx.current, budget_flag) if budget_flag else None
            if isinstance(budget, int) and budget > 0:
                limit = min(limit, budget)
        return limit

    @classmethod
    def _limit_binds(cls, running: float | None, expected: int | None, current: Any, ctx: Any) -> bool:
        """Whether the sequence limit is what keeps requests waiting: the running count reached
        it. Not when every one of the expected users already ran at once (a closed loop cannot send
        more), nor when the running count stayed below the limit in force, the flag's or, unset,
        the engine's default (13 of vLLM's default 128 or more running while 18 wait is a KV or token
        budget queue, which a higher max-num-seqs cannot drain)."""
        if running is None:
            return True
        if ctx.tune.load.concurrency is not None and expected and running >= expected:
            return False
        limit = cls._limit(current, ctx)
        return not (limit is not None and running < limit)

    @classmethod
    def _below(cls, running: float | None, users: int | None, current: Any, ctx: Any) -> str:
        if users and running is not None and running >= users:
            return f"all {users} users at once"
        if isinstance(current, int):
            return f"below the limit {current}"
        limit = cls._limit(current, ctx)
        return (
            f"below the engine's default limit, {limit} or more"
            if limit is not None
            else "below the engine's default limit"
        )

    def run(self, ctx: TuneContext) -> StepResult:
        done, inc = prologue(
            ctx, self.name, FLAG, incumbent_first=True, missing="no baseline measurement to derive candidates from"
        )
        if done is not None:
            return done
        assert inc is not None  # prologue hands the incumbent back when every check passed
        flag = ctx.knob(FLAG).flag
        assert flag is not None  # prologue skipped a kind without it
        given = ctx.candidates(flag)
        values, why, nothing = (given, "the tune file's candidates", "") if given else self.derive(ctx, inc)
        if not values:
            # the formula's values are still recorded: what a grid over this flag would try
            formula = sorted(
                {v for v in (self.fit(inc), ctx.tune.load.concurrency) if v and v != flag_of(ctx.current, flag)}
            )
            return StepResult(
                self.name,
                "kept",
                f"{why}; {nothing}.",
                dict(ctx.current),
                [tried_row(inc)],
                {"derived": why, "candidates": [], "formula": formula},
            )
        current = flag_of(ctx.current, flag)
        cur_name = current if current is not None else "default"
        # the guide's formula first: when its value (KV tokens / mean context) ends the storm or
        # wins, the other values are not started; they run only when it does not
        fit = self.fit(inc)
        first = [fit] if not given and fit in values and len(values) > 1 else values
        rest = [v for v in values if v not in first]

        def tie(inc_m: Measurement, cand: Measurement) -> str | None:
            return "ends the storm" if storm(inc_m) and not storm(cand) else None

        lowering = bool(storm(inc)) or all(
            isinstance(v, int) and isinstance(current, int) and v < current for v in values
        )
        objective = LOWER if lowering else RAISE
        bar = storm if lowering else (lambda m: storm(m) or kv_full(m))
        done, best, results = one_flag(
            ctx, self.name, flag, first, disqualify=bar, accept_tie_when=tie, objective=objective
        )
        if done is not None:
            return done
        skipped_note = ""
        if rest and best is None:
            done, best, more = one_flag(
                ctx, self.name, flag, rest, disqualify=bar, accept_tie_when=tie, suffix="-more", objective=objective
            )
            if done is not None:
                return done
            results += more[1:]
        elif rest:
            skipped_note = f" ({', '.join(map(str, rest))} not started: the formula's {fit} decided)"
        tried = [tried_row(m, j, storm=storm(m), kv_full=kv_full(m)) for _, m, j in results]
        inc_m = results[0][1]

        def desc(v: Any, m: Measurement) -> str:
            kv_mean = m.summary_value(lambda s: s.engine.kv_usage.mean)
            return (
                f"at {v if v is not None else cur_name}: goodput {fmt(m.goodput())} req/s, KV usage mean/max "
                f"{fmt(kv_mean)}/{fmt(m.metric('kv_usage_max'))}, {fmt(m.metric('preemptions'), '.0f')} preemptions"
            )

        def verdict(v: Any, m: Measurement, j: Any) -> str:
            barred = bar(m)
            if barred:
                return f"{label({flag: v})}: cannot win: {barred}"
            return f"{label({flag: v})}: {j.text()}" if j is not None else ""

        others = "; ".join(desc(v, m) for v, m, _ in results[1:])
        judged = "; ".join(x for x in (verdict(v, m, j) for v, m, j in results[1:]) if x)
        inc_storm = storm(inc_m)
        head = f"{why}; " + (f"storm at {cur_name}: {inc_storm}; " if inc_storm else "")
        rule = (
            "lowering ends a storm: taken for fewer preemptions (or more goodput) beyond noise without a goodput loss"
            if lowering
            else "raising admits waiting requests: taken for goodput or TTFT better beyond noise with "
            f"steady-state KV below {100 * RAISE_BELOW_KV:.0f}%"
        )
        if best is None:
            reason = head + f"{desc(current, inc_m)}; {others}. {judged}. None taken ({rule})"
            return StepResult(
                self.name, "kept", reason + ".", dict(ctx.current), tried, {"derived": why, "candidates": values}
            )
        j = next(j for _, m, j in results if m is best)
        assert j is not None  # the best was judged against the current one
        how = "ends the storm at equal goodput (within noise)" if j.verdict == "tie" else j.why
        ctx.current = best.flags
        reason = (
            head
            + f"{desc(current, inc_m)}; {others}. {judged}. {label({flag: flag_of(best.flags, flag)})}: {how}{skipped_note}"
        )
        return StepResult(
            self.name, "changed", reason + ".", dict(best.flags), tried, {"derived": why, "candidates": values}
        )


STEPS.add(MaxNumSeqs.name, MaxNumSeqs())
