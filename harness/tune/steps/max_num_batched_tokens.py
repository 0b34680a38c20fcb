"""Step 6, max-num-batched-tokens / chunked prefill: the token budget for the prompt mix.

Guide 001 1.1: chunked prefill with a budget of 512 tokens first; compare TTFT and ITL p50 and
p99 on the mix, since a large budget lets one long prefill stall every decoding request (p99
ITL spikes) while a small one makes long prompts slower to start. The step runs when the
baseline shows decode stalls (ITL p99 at least twice p50) or the tune file lists budgets. A
candidate wins on goodput beyond noise, or, at equal goodput (the TTFT SLO still holding), on
ITL p99 lower beyond noise: the budget that protects decode latency. The guide's 512 runs first;
when it wins and leaves no stall (ITL p99 below 2x p50) the step stops there, otherwise 2048 is
measured too, and among budgets that win the largest is taken: a smaller one only makes long
prompts slower to start.
"""

from __future__ import annotations

from typing import Any

from harness.report.compare import Options, compare_runs
from harness.report.data import load_run
from harness.report.metrics import METRICS
from harness.tune.measure import Measurement, flag_of, merged
from harness.tune.steps.base import STEPS, StepResult, fmt, prologue, tried_row

FLAG = "max-num-batched-tokens"
CHUNKED = "enable-chunked-prefill"
STALL_RATIO = 2.0
GUIDE_START = 512


def itl_p99_change(inc: Measurement, cand: Measurement, threshold_pct: float) -> tuple[str, str]:
    """('better' | 'worse' | 'tie', text) for ITL p99 over every scenario, by the compare's noise tests."""
    out = []
    for s in inc.scenarios:
        b = [load_run(p) for p in inc.run_dirs(s)]
        c = [load_run(p) for p in cand.run_dirs(s)]
        if not b or not c:
            continue
        (row,) = compare_runs(b, c, [METRICS["itl.p99"]], Options(threshold_pct=threshold_pct))
        out.append((s, row))
    verdicts = {"improved": "better", "REGRESSION": "worse"}
    vs = [verdicts.get(r.verdict, "tie") for _, r in out]
    text = "; ".join(f"{s}: ITL p99 {fmt(r.baseline, '.1f')} -> {fmt(r.candidate, '.1f')} ms ({r.verdict})" for s, r in out)
    if "worse" in vs:
        return "worse", text
    return ("better" if "better" in vs else "tie"), text


def stalls(m: Measurement) -> bool:
    """Decode stalls remain: ITL p99 at least STALL_RATIO times p50 (unknown counts as a stall)."""
    p50, p99 = m.metric("itl_p50_ms"), m.metric("itl_p99_ms")
    return not (p50 and p99 is not None and p99 / p50 < STALL_RATIO)


def longest_prompt(scenarios: list[Any]) -> int | None:
    from harness.tune.load import _max_len

    out = 0
    for sc in scenarios:
        for cls in sc.workload.classes:
            n = _max_len(cls.input_tokens) if cls.input_tokens is not None else None
            if n is None:
                return None
            out = max(out, n)
    return out or None


class MaxNumBatchedTokens:
    name = "max-num-batched-tokens"
    summary = "when ITL p99 >= 2x p50 and prompts exceed 512 tokens (decodes stalled by prefills): chunked prefill at 512 and 2048 tokens; goodput first, then ITL p99"

    def run(self, ctx) -> StepResult:  # type: ignore[no-untyped-def]
        done, inc = prologue(ctx, self.name, FLAG, incumbent_first=True)
        if done is not None:
            return done
        flag = ctx.knob(FLAG).flag or FLAG
        chunked = ctx.knob(CHUNKED).flag  # None: the kind always chunks (nothing to switch on)
        p50, p99 = inc.metric("itl_p50_ms"), inc.metric("itl_p99_ms")
        given = ctx.candidates(flag)
        ratio = (p99 / p50) if p50 and p99 else None
        stall = f"ITL p99 {fmt(p99, '.1f')} ms is {fmt(ratio, '.1f')}x p50 {fmt(p50, '.1f')} ms"
        current = flag_of(ctx.current, flag)
        if not given and (ratio is None or ratio < STALL_RATIO):
            return StepResult(self.name, "skipped", f"{stall}: no decode stalls from long prefills to protect "
                              f"(below {STALL_RATIO:g}x); the budget stays as it is.", dict(ctx.current))
        longest = longest_prompt(ctx.spec.parsed)
        if not given and longest is not None and longest <= GUIDE_START:
            return StepResult(self.name, "skipped", f"{stall}, but no prompt is longer than {GUIDE_START} tokens (longest {longest}): "
                              "no long prefill to chunk; the budget stays as it is.", dict(ctx.current))
        if not given and isinstance(current, int) and current <= GUIDE_START and (chunked is None or flag_of(ctx.current, chunked) is not False):
            return StepResult(self.name, "skipped", f"{stall}, but the budget is already {current} tokens with chunked prefill, "
                              f"at or below the guide's starting point ({GUIDE_START}); list candidates to try others.", dict(ctx.current))
        seqs_flag = ctx.knob("max-num-seqs").flag
        seqs = flag_of(ctx.current, seqs_flag) if seqs_flag else None
        values = [v for v in (given or [GUIDE_START, 2048]) if v != current]
        dropped = [v for v in values if isinstance(seqs, int) and isinstance(v, int) and v < seqs]
        values = [v for v in values if v not in dropped]
        change: dict[Any, dict[str, Any]] = {}
        for v in values:
            c: dict[str, Any] = {flag: v}
            if chunked is not None and flag_of(ctx.current, chunked) is False:
                c[chunked] = True  # a budget below the prompt length needs chunked prefill
            change[v] = c
        from harness.tune.judge import judge

        # the guide's 512 first: when it wins and leaves no stall (ITL p99 below 2x p50), larger
        # budgets are not started; they run when it loses (e.g. long prompts miss the TTFT SLO)
        # or still stalls. Candidates from the tune file run together.
        rounds = [values] if given or GUIDE_START not in values or len(values) == 1 else [
            [GUIDE_START], [v for v in values if v != GUIDE_START]]
        rows: list[dict[str, Any]] = []
        winners: list[tuple[Any, ...]] = []
        measured: list[tuple[Any, Measurement]] = []
        not_started = ""
        for r, vals in enumerate(rounds):
            sets = [ctx.current] + [merged(ctx.current, change[v]) for v in vals]
            ms = ctx.measure(self.name, sets, suffix="-more" if r else "")
            if ms is None:
                if r:
                    break  # the first round decides alone
                return ctx.budget_skip(self.name)
            inc = ms[0]
            if not rows:
                rows.append(tried_row(inc))
            for v, m in zip(vals, ms[1:]):
                j = judge(inc, m, ctx.threshold_pct)
                itl, itl_text = itl_p99_change(inc, m, ctx.threshold_pct) if m.ok else ("worse", "did not run")
                rows.append(tried_row(m, j, itl_p99_vs_current=itl_text))
                measured.append((v, m))
                if m.ok and (j.verdict == "better" or (j.verdict == "tie" and itl == "better")):
                    winners.append((j.verdict == "better", v if isinstance(v, (int, float)) else 0, v, m, j, itl_text))
            if r + 1 < len(rounds) and winners and not stalls(winners[0][3]):
                later = ", ".join(map(str, rounds[r + 1]))
                not_started = f" ({later} not started: {GUIDE_START} leaves no stall, ITL p99 below {STALL_RATIO:g}x p50)"
                break
        cur_name = current if current is not None else "the default"

        def desc(v: Any, m: Measurement) -> str:
            return (f"{v}: goodput {fmt(m.goodput())} req/s, TTFT p50/p99 {fmt(m.metric('ttft_p50_ms'), '.0f')}/{fmt(m.metric('ttft_p99_ms'), '.0f')} ms, "
                    f"ITL p50/p99 {fmt(m.metric('itl_p50_ms'), '.1f')}/{fmt(m.metric('itl_p99_ms'), '.1f')} ms")

        listing = "; ".join([desc(cur_name, inc)] + [desc(v, m) for v, m in measured])
        note = f" ({', '.join(map(str, dropped))} left out: below max-num-seqs {seqs})" if dropped else ""
        note += not_started
        if not winners:
            return StepResult(self.name, "kept", f"{stall}; {listing}: no budget beats {cur_name} beyond noise on goodput "
                              f"or, at equal goodput, on ITL p99{note}.", dict(ctx.current), rows)
        # goodput winners first; then budgets that leave no stall (ITL p99 below 2x p50) before
        # those that only shrink it; among those the largest, since a smaller one only makes long
        # prefills slower (guide 000)
        winners.sort(key=lambda w: (not w[0], stalls(w[3]), -w[1]))
        by_goodput, _, v, m, j, itl_text = winners[0]
        why = f"goodput beyond noise ({j.text()})" if by_goodput else f"equal goodput within noise and {itl_text}"
        ctx.current = m.flags
        return StepResult(self.name, "changed", f"{stall}; {listing}: {flag} {v} wins on {why}{note}.", dict(m.flags), rows,
                          {"candidates": values})


STEPS.add(MaxNumBatchedTokens.name, MaxNumBatchedTokens())
