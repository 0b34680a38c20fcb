"""Step 6, max-num-batched-tokens / chunked prefill: the token budget for the prompt mix.

Objective (guide 001 1.1: "Compare p50 and p99 for both TTFT and ITL"; guide 000: "A smaller
value gives decode requests more frequent scheduling opportunities and can reduce inter-token
latency ... A small token budget can protect decode latency and make long-prefill completion
slower"): ITL p99 (the spikes long prefills cause) is the target; the typical decode speed
(TPOT p50: the median request's time per output token, the per-request ITL) and TTFT p50/p99
are the named costs; goodput is the guard. TPOT rather than the per-token ITL p50: when a server
flushes several tokens at once (vLLM's CPU build on a busy box sent whole answers in one burst),
most per-token gaps are zero and ITL p50 says nothing, while TPOT still measures decode speed.
Prior: the budget is the engine's (or the deployment's) value, and leaving it needs a measured
gain: ITL p99 better beyond noise, goodput not worse beyond noise, and no cost larger than the
gain: a TPOT p50 worse beyond noise by more (in %) than ITL p99 improved is harm (a budget that
cuts the spikes by slowing every decode step five times, as 512 did at 16 sequences on the storm
case, is no win), and so is a TTFT loss beyond
noise larger than the gain when no TTFT SLO prices it through goodput (the guide's "slightly"
slower long prompts, not several times slower). Chunked prefill itself is the engines' default:
when the current flags turn it off, the candidate that turns it on is taken unless worse beyond
noise.

The step runs when the baseline shows decode stalls (ITL p99 at least twice TPOT p50) or the
tune file lists budgets. The guide's 512 runs first; when it wins and leaves no stall (ITL p99
below 2x TPOT p50) the step stops there, otherwise 2048 is measured too. Among the budgets that
win, the guide's "measure both" decides, by the same comparison `harness compare LARGER SMALLER`
makes of their cells: the largest winner holds unless a smaller one is better beyond noise on
ITL p99 or TPOT p50 (the typical decode speed, for ITL p50) and not worse beyond noise on either,
on TTFT p50/p99, goodput or failed requests; an undecided difference buys interleaved repeats
like every judgement. Not "the largest" blindly: on the H200 (results/examples/gpu-h200-vllm-
tune) 2048 was chosen over 512 at equal goodput and TTFT with ITL p99 51.4 ms against 17.4 ms.
The larger budget holds a tie because a smaller one only makes long prompts slower to start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.tune.judge import THROUGHPUT, Judgement, Objective
from harness.tune.measure import Measurement, flag_of, merged
from harness.tune.steps.base import STEPS, StepResult, dead, failed_step, fmt, prologue, settle, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

FLAG = "max-num-batched-tokens"
CHUNKED = "enable-chunked-prefill"
STALL_RATIO = 2.0
GUIDE_START = 512
OBJECTIVE = Objective(targets=("itl.p99",), costs=("tpot.p50", "ttft.p50", "ttft.p99"))
#: two winning budgets weighed against each other: decode latency is the gain, TTFT may not be lost
BETWEEN = Objective(targets=("itl.p99", "tpot.p50"), guards=("ttft.p50", "ttft.p99"))


def pick(
    winners: list[tuple[Any, Measurement]],
    between: Callable[[tuple[Any, Measurement], tuple[Any, Measurement]], Judgement],
) -> tuple[int, list[str]]:
    """The index of the winner to take, and one line per comparison that chose it. The largest
    budget first; each smaller one replaces the holder when `between(holder, smaller)` (the
    BETWEEN judgement, the smaller as the candidate) says it is better beyond noise."""

    def size(v: Any) -> float:
        return float(v) if isinstance(v, (int, float)) else 0.0

    order = sorted(range(len(winners)), key=lambda i: -size(winners[i][0]))
    best, notes = order[0], []
    for i in order[1:]:
        j = between(winners[best], winners[i])
        took = j.verdict == "better"
        notes.append(f"{winners[i][0]} vs {winners[best][0]}: {j.text()}: {winners[i if took else best][0]} holds")
        if took:
            best = i
    return best, notes


def cost_too_high(j: Judgement, has_ttft_slo: bool) -> str | None:
    """Why the named costs outweigh the ITL p99 gain (None: the trade holds): TPOT p50, and TTFT
    when no TTFT SLO prices it, worse beyond noise by more (in %) than ITL p99 improved."""
    if j.cmp is None:
        return None
    costs = ("tpot.p50",) if has_ttft_slo else ("tpot.p50", "ttft.p50", "ttft.p99")
    worst: tuple[float, str] = (0.0, "")
    gain = 0.0
    for rows in j.cmp.rows.values():
        for k in costs:
            r = rows.get(k)
            if r is not None and r.verdict == "REGRESSION" and r.change is not None and r.change > worst[0]:
                worst = (r.change, r.label)
        r = rows.get("itl.p99")
        if r is not None and r.verdict == "improved" and r.change is not None:
            gain = max(gain, -r.change)
    if worst[0] > gain:
        why = "" if has_ttft_slo or worst[1].startswith("TPOT") else " with no TTFT SLO to price it through goodput"
        return f"{worst[1]} worse beyond noise by {worst[0]:+.0f}%, more than ITL p99 improved ({gain:.0f}%){why}"
    return None


def typical_gap(m: Measurement) -> float | None:
    """The median request's time per output token (TPOT p50): the decode step a stall is measured
    against (the per-token ITL p50 is zero when tokens arrive in bursts)."""
    return m.summary_value(lambda s: s.latency_ms["tpot"].p50 if "tpot" in s.latency_ms else None)


def stalls(m: Measurement) -> bool:
    """Decode stalls remain: ITL p99 at least STALL_RATIO times TPOT p50 (unknown counts as a stall)."""
    p50, p99 = typical_gap(m), m.metric("itl_p99_ms")
    return not (p50 and p99 is not None and p99 / p50 < STALL_RATIO)


def longest_prompt(scenarios: list[Any]) -> int | None:
    """The longest prompt of the workload's generated classes (harness.workload.context; None when
    some length has no maximum or a class replays files, whose lengths need the files)."""
    from harness.workload.context import plain_class

    out = 0
    for sc in scenarios:
        for cls in sc.workload.classes:
            if cls.session is not None or cls.dataset is not None:
                return None
            n = plain_class(cls).prompt
            if n is None:
                return None
            out = max(out, n)
    return out or None


class MaxNumBatchedTokens:
    name = "max-num-batched-tokens"
    knobs = (FLAG, CHUNKED)  # the guide knobs it moves (the plan shows each kind's spelling)
    summary = (
        "when ITL p99 >= 2x p50 and prompts exceed 512 tokens (decodes stalled by prefills): chunked prefill at 512 "
        "then 2048 tokens; ITL p99 must improve beyond noise, TPOT p50 and TTFT are the named costs, goodput the guard"
    )

    def run(self, ctx: TuneContext) -> StepResult:
        done, inc = prologue(ctx, self.name, FLAG, incumbent_first=True)
        if done is not None:
            return done
        assert inc is not None  # prologue hands the incumbent back when every check passed
        flag = ctx.knob(FLAG).flag or FLAG
        chunk_knob = ctx.knob(CHUNKED)
        chunked = chunk_knob.flag  # None: the kind always chunks (nothing to switch on)
        p50, p99 = typical_gap(inc), inc.metric("itl_p99_ms")
        given = ctx.candidates(flag)
        ratio = (p99 / p50) if p50 and p99 else None
        stall = f"ITL p99 {fmt(p99, '.1f')} ms is {fmt(ratio, '.1f')}x the median request's time per token (TPOT p50 {fmt(p50, '.1f')} ms)"
        current = flag_of(ctx.current, flag)
        if not given and (ratio is None or ratio < STALL_RATIO):
            return StepResult(
                self.name,
                "skipped",
                f"{stall}: no decode stalls from long prefills to protect "
                f"(below {STALL_RATIO:g}x); the budget stays as it is.",
                dict(ctx.current),
            )
        longest = longest_prompt(ctx.spec.parsed)
        if not given and longest is not None and longest <= GUIDE_START:
            return StepResult(
                self.name,
                "skipped",
                f"{stall}, but no prompt is longer than {GUIDE_START} tokens (longest {longest}): "
                "no long prefill to chunk; the budget stays as it is.",
                dict(ctx.current),
            )
        chunking_off = chunked is not None and chunk_knob.is_on(flag_of(ctx.current, chunked)) is False
        if not given and isinstance(current, int) and current <= GUIDE_START and not chunking_off:
            return StepResult(
                self.name,
                "skipped",
                f"{stall}, but the budget is already {current} tokens with chunked prefill, "
                f"at or below the guide's starting point ({GUIDE_START}); list candidates to try others.",
                dict(ctx.current),
            )
        seqs_flag = ctx.knob("max-num-seqs").flag
        seqs = flag_of(ctx.current, seqs_flag) if seqs_flag else None
        values = [v for v in (given or [GUIDE_START, 2048]) if v != current]
        dropped = [v for v in values if isinstance(seqs, int) and isinstance(v, int) and v < seqs]
        values = [v for v in values if v not in dropped]
        change: dict[Any, dict[str, Any]] = {}
        for v in values:
            c: dict[str, Any] = {flag: v}
            if chunking_off and chunked is not None and chunked != flag:  # (SGLang: the budget is the switch, -1 off)
                c[chunked] = chunk_knob.on  # a budget below the prompt length needs chunked prefill
            change[v] = c
        # chunked prefill is the engines' default: turning it back on needs only no measured harm
        prior = "candidate" if chunking_off else "incumbent"
        ttft_slo = has_ttft_slo(ctx.spec.parsed, ctx.tune.slo)

        # the guide's 512 first: when it wins and leaves no stall (ITL p99 below 2x p50), larger
        # budgets are not started; they run when it loses (e.g. long prompts miss the TTFT SLO)
        # or still stalls. Candidates from the tune file run together.
        rounds = (
            [values]
            if given or GUIDE_START not in values or len(values) == 1
            else [[GUIDE_START], [v for v in values if v != GUIDE_START]]
        )
        rows: list[dict[str, Any]] = []
        winners: list[tuple[Any, ...]] = []
        measured: list[tuple[Any, Measurement, Judgement]] = []
        not_started = ""
        for r, vals in enumerate(rounds):
            sets = [ctx.current] + [merged(ctx.current, change[v]) for v in vals]
            ms = ctx.measure(self.name, sets, suffix="-more" if r else "")
            if ms is None:
                if r:
                    break  # the first round decides alone
                return ctx.budget_skip(self.name)
            inc = ms[0]
            results: list[tuple[Any, Measurement, Judgement | None]] = [
                (current, inc, None),
                *[(v, m, None) for v, m in zip(vals, ms[1:], strict=True)],
            ]
            if dead(results):
                return failed_step(ctx, self.name, flag, results, rows + [tried_row(m) for _, m, _ in results[1:]])
            if not rows:
                rows.append(tried_row(inc))
            for v, m in zip(vals, ms[1:], strict=True):
                j = settle(ctx, self.name, inc, m, OBJECTIVE, prior)
                cost = cost_too_high(j, ttft_slo) if j.verdict == "better" else None
                rows.append(tried_row(m, j, cost_too_high=cost))
                measured.append((v, m, j))
                if j.verdict == "better" and cost is None:
                    winners.append(
                        (
                            j.cmp is not None and j.cmp.direction(j.cmp.guard) == "better",
                            v if isinstance(v, (int, float)) else 0,
                            v,
                            m,
                            j,
                        )
                    )
            if r + 1 < len(rounds) and winners and not stalls(winners[0][3]):
                later = ", ".join(map(str, rounds[r + 1]))
                not_started = (
                    f" ({later} not started: {GUIDE_START} leaves no stall, ITL p99 below {STALL_RATIO:g}x TPOT p50)"
                )
                break
        if rows:  # the incumbent's row lists every cell it has now, repeats bought by any comparison included
            rows[0] = tried_row(inc)
        cur_name = current if current is not None else "the default"

        def desc(v: Any, m: Measurement, j: Judgement | None) -> str:
            head = f"{v}: {j.text()}" if j is not None else f"{v}"
            cost = cost_too_high(j, ttft_slo) if j is not None and j.verdict == "better" else None
            return head + (f"; rejected: {cost}" if cost else "")

        listing = "; ".join(desc(v, m, j) for v, m, j in measured)
        note = f" ({', '.join(map(str, dropped))} left out: below max-num-seqs {seqs})" if dropped else ""
        note += not_started
        slo_note = "" if ttft_slo else " (no TTFT SLO: TTFT is weighed against the ITL gain)"
        if not winners:
            return StepResult(
                self.name,
                "kept",
                f"{stall}. No budget taken: leaving {cur_name} needs ITL p99 better beyond noise, goodput and "
                f"failed requests not worse, and no larger cost on TPOT p50 or TTFT{slo_note}{note}. "
                f"Measured: {cur_name} (current) vs {listing}.",
                dict(ctx.current),
                rows,
            )

        # guide 001 1.1 "measure both": the winners weighed against each other on ITL and TTFT,
        # the largest holding a tie (a smaller budget only makes long prefills slower)
        def between(holder: tuple[Any, Measurement], smaller: tuple[Any, Measurement]) -> Judgement:
            return settle(ctx, self.name, holder[1], smaller[1], BETWEEN, "incumbent", tag=f"pick-{smaller[0]}")

        best, weighed = pick([(w[2], w[3]) for w in winners], between)
        _by_goodput, _, v, m, j = winners[best]
        among = ""
        if weighed:
            among = (
                f" Among the budgets that win, a smaller one replaces a larger only when better beyond noise on ITL p99 "
                f"or TPOT p50 and not worse beyond noise on either, on TTFT p50/p99, {_guard(j)} or failed requests "
                f"(as `harness compare LARGER SMALLER` reads their cells): {'; '.join(weighed)}."
            )
        ctx.current = m.flags
        return StepResult(
            self.name,
            "changed",
            f"{stall}. Taken: {flag} {v} ({j.why}, and its costs on TPOT p50 and TTFT do not exceed the "
            f"ITL p99 gain){slo_note}{note}. Measured: {cur_name} (current) vs {listing}.{among}",
            dict(m.flags),
            rows,
            {"candidates": values},
        )


def _guard(j: Judgement) -> str:
    return "requests/s" if j.cmp is not None and j.cmp.guard == THROUGHPUT else "goodput"


def has_ttft_slo(scenarios: list[Any], override: Any) -> bool:
    """Whether any class of the workload has a TTFT limit (the tune file's slo replaces the scenarios')."""
    if override is not None:
        return override.ttft_ms is not None
    for sc in scenarios:
        if sc.slo is not None and sc.slo.ttft_ms is not None:
            return True
        if any(c.slo is not None and c.slo.ttft_ms is not None for c in sc.workload.classes):
            return True
    return False


STEPS.add(MaxNumBatchedTokens.name, MaxNumBatchedTokens())
