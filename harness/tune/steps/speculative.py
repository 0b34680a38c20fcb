"""Step 10, speculative: only when inter-token latency is still the limit.

Objective (guide 000 "Tune speculative decoding", guide 001 3.2): ITL (TPOT p50 and ITL p99) and
requests/s, with the acceptance rate, mean acceptance length, per-position acceptance and GPU
memory beside them; goodput is the guard. ITL is the limit when decoding is most of a request's
time (median E2E minus median TTFT above half the median E2E). Methods come from `candidates`
(speculative-config): a draft model or MTP heads are the user's to name. Prior: the guides start
with speculation disabled, so turning it on needs a measured gain (ITL better beyond noise)
without requests/s or goodput worse beyond noise (guide 000: high concurrency already uses the
GPU well), and a method below 50% acceptance is rejected whatever it measured (guide 001: "Below
50% acceptance, speculative decoding hurts"). When the current flags already speculate, off is
the default to return to: taken unless it is worse beyond noise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.quality.gate import QualityVerdict
from harness.results.run_metrics import BY_NAME as RUN
from harness.tune.judge import Judgement, Objective
from harness.tune.measure import Measurement
from harness.tune.quality import refusal, row, verdict
from harness.tune.steps.base import STEPS, StepResult, fmt, label, one_flag, prologue, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

FLAG = "speculative-config"
MIN_ACCEPTANCE = 0.5
#: ITL as the request sees it (TPOT p50: speculation sends several tokens per chunk, so per-token
#: gaps inside a chunk are zero), its tail, and requests/s. The tail is the named cost: the tokens
#: that get no accepted draft (a request's first ones, before the ngram has anything to look up)
#: pay the speculative path's longer step, so ITL p99 can rise while the median token time falls
#: threefold (vLLM 0.26 on an H100, drafts accepted at 100%: TPOT p50 -66%, ITL p99 +18%, requests/s
#: +214%); the step weighs that trade itself (`tail_cost_too_high`).
OBJECTIVE = Objective(targets=("tpot.p50", "itl.p99", "rps"), costs=("itl.p99",))


def tail_cost_too_high(j: Judgement) -> str | None:
    """Why the ITL p99 cost outweighs the gain (None: the trade holds): ITL p99 worse beyond noise
    by more (in %) than TPOT p50 improved, in any scenario."""
    if j.cmp is None:
        return None
    for rows in j.cmp.rows.values():
        tail, median = rows.get("itl.p99"), rows.get("tpot.p50")
        if tail is None or tail.verdict != "REGRESSION" or tail.change is None:
            continue
        gain = -median.change if median is not None and median.verdict == "improved" and median.change else 0.0
        if tail.change > gain:
            return f"ITL p99 worse beyond noise by {tail.change:+.0f}%, more than TPOT p50 improved ({gain:.0f}%)"
    return None


def tail_worse(j: Judgement) -> str | None:
    """Turning speculation off: ITL p99 worse beyond noise is harm, as for any other target."""
    for rows in j.cmp.rows.values() if j.cmp is not None else []:
        tail = rows.get("itl.p99")
        if tail is not None and tail.verdict == "REGRESSION" and tail.change is not None:
            return f"ITL p99 worse beyond noise by {tail.change:+.0f}% without speculation"
    return None


def tail_cost(j: Judgement) -> str:
    """The named cost a taken candidate pays, said beside the decision ('' when the tail held)."""
    for rows in j.cmp.rows.values() if j.cmp is not None else []:
        tail = rows.get("itl.p99")
        if tail is not None and tail.verdict == "REGRESSION" and tail.change is not None:
            return (
                f"; the named cost: ITL p99 {tail.change:+.0f}% beyond noise (tokens without an accepted draft "
                "take the speculative path's longer step), smaller than the TPOT p50 gain"
            )
    return ""


def low_acceptance(m: Measurement) -> str | None:
    a = m.summary_value(RUN["spec_acceptance_rate"].get)
    if a is not None and a < MIN_ACCEPTANCE:
        return f"acceptance {100 * a:.0f}% below 50%"
    if a is None and _drafted(m) == 0:
        # vLLM's ngram proposer finds nothing to look up in text without repeats (a model with
        # random weights): the config pays for the speculative path and accepts nothing
        return "the engine drafted no tokens in the window (0 draft tokens: nothing to accept)"
    return None


def _tpot_p50(m: Measurement) -> float:
    """The candidates' rank: the median request's time per output token (lower is better)."""
    return m.summary_value(lambda s: s.latency_ms["tpot"].p50 if "tpot" in s.latency_ms else None) or 1e18


def _drafted(m: Measurement) -> float | None:
    """Draft tokens the engine reports over the window (None when it reports none at all)."""
    return m.summary_value(lambda s: s.engine.spec_decode.draft_tokens if s.engine.spec_decode else None)


class Speculative:
    name = "speculative"
    knobs = (FLAG,)  # the guide knobs it moves (the plan shows each kind's spelling)
    summary = "only when decode time is most of E2E and speculative-config candidates are given; reject below 50% acceptance or lower goodput"

    def run(self, ctx: TuneContext) -> StepResult:
        done, inc = prologue(ctx, self.name, FLAG)
        if done is not None:
            return done
        assert inc is not None  # prologue hands the incumbent back when every check passed
        e2e, ttft = inc.metric("e2e_p50_ms"), inc.metric("ttft_p50_ms")
        decode_share = (e2e - ttft) / e2e if e2e and ttft is not None else None
        limit = f"decode is {fmt((decode_share or 0) * 100, '.0f')}% of median E2E ({fmt(e2e, '.0f')} ms, TTFT p50 {fmt(ttft, '.0f')} ms)"
        if decode_share is None or decode_share <= 0.5:
            return StepResult(
                self.name, "skipped", f"ITL is not the limit: {limit}.", dict(ctx.current), [tried_row(inc)]
            )
        knob = ctx.knob(FLAG)  # the kind's flag(s): SGLang's algorithm + draft flags, TGI's --speculate N
        flag = knob.flag or FLAG
        current = knob.value(ctx.current)
        values = [v for v in (ctx.candidates(flag) or []) if v != current]
        if current is not None:
            values = [None, *values]  # speculation already on: off is the guide's starting point
        if not values:
            return StepResult(
                self.name,
                "skipped",
                f"ITL is the limit ({limit}), but no speculative-config candidates: "
                "list the draft model / MTP / ngram methods to try under candidates.",
                dict(ctx.current),
                [tried_row(inc)],
            )
        verdicts: dict[str, QualityVerdict | None] = {}

        def refused(m: Measurement) -> str | None:
            """Low acceptance, or (with a quality block) greedy outputs that differ from the current
            best's: speculative decoding must be lossless, a difference is an engine problem."""
            if ctx.tune.quality is not None:
                verdicts[m.config_id] = v = verdict(ctx, inc, m)
                if v is not None and refusal(v):
                    return refusal(v)
            return low_acceptance(m)

        done, best, results = one_flag(
            ctx,
            self.name,
            flag,
            values,
            disqualify=refused,
            objective=OBJECTIVE,
            prior=lambda v: "candidate" if v is None else "incumbent",
            rank=lambda m: -_tpot_p50(m),
        )
        if done is not None:
            return done
        # the tail is a cost only of speculating; turning it off must not worsen it at all
        costly = {
            m.config_id: why
            for v, m, j in results[1:]
            if j is not None
            and j.verdict == "better"
            and (why := tail_cost_too_high(j) if v is not None else tail_worse(j))
        }
        if best is not None and best.config_id in costly:
            # the next best whose trade holds, by the same rank (TPOT p50)
            rest = [
                (m, j)
                for _, m, j in results[1:]
                if j is not None and j.verdict == "better" and m.config_id not in costly
            ]
            best = min(rest, key=lambda mj: _tpot_p50(mj[0]))[0] if rest else None
        tried = [
            tried_row(
                m,
                j,
                low_acceptance=low_acceptance(m),
                quality=row(verdicts.get(m.config_id)),
                **({"cost_too_high": costly[m.config_id]} if m.config_id in costly else {}),
            )
            for _, m, j in results
        ]

        def desc(m: Measurement) -> str:
            a = m.summary_value(RUN["spec_acceptance_rate"].get)
            ln = m.summary_value(RUN["spec_mean_acceptance_length"].get)
            acc = f", acceptance {100 * a:.0f}%, mean length {fmt(ln)}" if a is not None else ""
            return f"goodput {fmt(m.goodput())} req/s, {fmt(m.metric('req_per_s'))} req/s, ITL p50 {fmt(m.metric('itl_p50_ms'), '.1f')} ms{acc}"

        def name(v: object) -> str:
            return "without speculation" if v is None else label(knob.change(v))

        listing = "; ".join(
            f"{name(v)}{' (current)' if i == 0 else ''}: {desc(m)}" for i, (v, m, _) in enumerate(results)
        )
        if best is None:
            reasons: list[str] = []
            for _v, m, j in results[1:]:
                v = verdicts.get(m.config_id)
                if v is not None and (refused_why := refusal(v)):
                    low = low_acceptance(m)
                    reasons.append(refused_why + (f" ({low})" if low else ""))
                elif low := low_acceptance(m):
                    reasons.append(low)
                elif m.config_id in costly:
                    reasons.append(costly[m.config_id])
                elif j is not None and j.verdict == "worse":
                    reasons.append(f"{j.text()} (at {inc.expected_level}: the guide's high-concurrency warning)")
                elif j is not None:
                    reasons.append(f"{j.text()}")
            return StepResult(
                self.name,
                "kept",
                f"ITL is the limit ({limit}); {listing}: rejected: {'; '.join(reasons)}.",
                dict(ctx.current),
                tried,
            )
        j = next(j for _, m, j in results if m is best)
        assert j is not None  # the best was judged against the current one
        ctx.current = {k: v for k, v in best.flags.items() if v is not None}
        won = "turning speculation off" if knob.value(best.flags) is None else "speculation"
        why = (
            f" (the guide's high-concurrency warning: at {inc.expected_level} drafts cost more than they save)"
            if knob.value(best.flags) is None
            else ""
        )
        return StepResult(
            self.name,
            "changed",
            f"ITL is the limit ({limit}); {listing}: {won}: {j.text()}{tail_cost(j) if not why else ''}{why}.",
            dict(ctx.current),
            tried,
        )


STEPS.add(Speculative.name, Speculative())
