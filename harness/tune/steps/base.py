"""The step seam: what every step module provides, what it hands back, and the shared walk of
"one flag, a few values, the others held at the current best".

A step reads the context (current best flags, the baseline, measurements so far) and returns a
StepResult: verdict changed | kept | skipped | failed, a reason naming the numbers, the
candidates it tried and the flags it chose. Steps never start engines themselves; they ask the
context to measure flag sets, which runs normal sweeps (and reuses what was measured before).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.registry import Registry
from harness.sweep.flags import describe
from harness.tune.judge import GOODPUT_ONLY, THROUGHPUT, Judgement, Objective, judge, repeats_to_decide
from harness.tune.measure import Measurement, flags_key, merged
from harness.tune.quality import refusal
from harness.tune.quality import verdict as quality_verdict

VERDICTS = ("changed", "kept", "skipped", "failed")


@dataclass
class StepResult:
    step: str
    verdict: str
    reason: str
    chosen: dict[str, Any]
    tried: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "verdict": self.verdict,
            "reason": self.reason,
            "tried": self.tried,
            "chosen": self.chosen,
            **({"details": self.details} if self.details else {}),
        }


class Step(Protocol):
    name: str
    #: one line for --plan: what the step does and when it is skipped
    summary: str
    # A step that moves engine flags also says which guide knobs (harness.engines.parts.flags.
    # GUIDE_KNOBS) as `knobs`, its own first; the plan shows each engine kind's spelling of them, and
    # a kind that lacks the first skips the step (or, per `without_knob`, what the step does instead).

    def run(self, ctx: Any) -> StepResult: ...


STEPS: Registry[Step] = Registry("tune step")


NO_MEASUREMENT = "no measurement of the current flags"


def prologue(
    ctx: Any, step: str, vllm_flag: str, *, incumbent_first: bool = False, missing: str = NO_MEASUREMENT
) -> tuple[StepResult | None, Measurement | None]:
    """What most steps check before anything else: that this engine kind has the step's flag (else
    the context's skipped result) and that the current flags have a good measurement (else skipped,
    `missing` saying why). Returns (the step's result when a check fails, else None; the
    incumbent). `incumbent_first`: the steps that read the measurement before the flag say so first."""

    def no_incumbent() -> StepResult | None:
        inc = ctx.incumbent()
        return StepResult(step, "skipped", missing, dict(ctx.current)) if inc is None or not inc.ok else None

    checks = (no_incumbent, lambda: ctx.lacks(step, vllm_flag))
    for check in reversed(checks) if not incumbent_first else checks:
        done = check()
        if done is not None:
            return done, None
    return None, ctx.incumbent()


def fmt(v: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "-" if v is None else f"{v:{spec}}{unit}"


def _or(v: object, missing: str = "?") -> str:
    """A fact as text, `missing` when the log did not tell it."""
    return missing if v is None else str(v)


def label(flags_change: dict[str, Any]) -> str:
    return describe(flags_change) or "(current)"


def storm(m: Measurement) -> str | None:
    """The guide's preemption storm: KV usage above 95% or frequent preemptions (one for every
    ten completed requests or more). None when neither holds."""
    kv = m.metric("kv_usage_max")
    pre = m.metric("preemptions") or 0.0
    done = m.metric("completed") or 0.0
    bits = []
    if pre and done and pre / done >= 0.1:
        bits.append(f"{pre:.0f} preemptions for {done:.0f} requests")
    if kv is not None and kv > 0.95 and pre:
        bits.append(f"KV usage max {kv:.2f}")
    return " and ".join(bits) or None


def tried_row(m: Measurement, j: Judgement | None = None, **extra: Any) -> dict[str, Any]:
    row = m.row()
    if j is not None:
        row["vs_current"] = {
            "verdict": j.verdict,
            "by": j.by,
            "rule": j.why,
            "evidence_repeats": j.evidence,
            "per_scenario": j.per_scenario,
        }
        if j.against:
            row["vs_current"]["against"] = j.against
    row.update(extra)
    return row


def settle(
    ctx: Any,
    step: str,
    incumbent: Measurement,
    candidate: Measurement,
    objective: Objective = GOODPUT_ONLY,
    prior: str = "incumbent",
    tag: str | None = None,
) -> Judgement:
    """Judge `candidate` against `incumbent`; while the answer is undecided (a difference beyond
    the threshold not yet beyond noise) buy evidence: another interleaved repeat of both sides,
    up to measure.evidence_repeats and within the budget, and judge again (`tag` names the
    repeats' sweep, by default the candidate's id; a second comparison of the same candidate in
    one step needs its own). Evidence that could
    not decide it (the intervals would need more runs than the repeats allowed) is not bought.
    What remains undecided is settled without more data (no measured difference), and the
    judgement says what was bought and what deciding it would cost.

    A verdict that overturns the guides' side (`prior` 'candidate' judged worse: prefix caching
    or compiled graphs rejected) on one run per side is confirmed first: one interleaved repeat
    of both sides is bought and the runs judged together, where `harness compare` also needs
    every candidate run beyond every incumbent run. One run's interval is over its own requests
    and time slices, so it cannot see the host drifting between two engine starts: on the vLLM
    CPU build, one "on" run measured requests/s -21% [-30, -8]% beside a busy neighbour and
    kept prefix caching off against the guide. A regression the repeat confirms still keeps it off."""
    t = ctx.threshold_pct
    j = judge(incumbent, candidate, t, objective, prior)
    limit = ctx.tune.measure.evidence_repeats
    bought = confirm = 0
    stop = confirm_stop = ""

    def runs_per_side() -> int:
        return min(incumbent.runs_per_scenario, candidate.runs_per_scenario)

    while True:
        runs = runs_per_side()
        if j.verdict == "worse" and prior == "candidate" and runs < 2 and not confirm:
            if bought >= limit:
                confirm_stop = f"measure.evidence_repeats {limit} allows no repeat"
                break
            if not ctx.measure_more(step, [incumbent, candidate], f"{tag or candidate.config_id}-confirm"):
                confirm_stop = getattr(ctx, "_budget_reason", "the budget allows no more")
                break
            bought += 1
            confirm = 1
            j = judge(incumbent, candidate, t, objective, prior)
            continue
        if j.verdict != "undecided":
            break
        need = repeats_to_decide(j.cmp, j.keys, runs) if j.cmp is not None else None
        if bought >= limit:
            stop = f"measure.evidence_repeats {limit} reached"
            break
        if need is not None and need > runs + (limit - bought):
            stop = (
                f"more repeats than measure.evidence_repeats {limit} allows would be needed, so none were bought"
                if not bought
                else f"the {limit - bought} repeat(s) left could not decide it"
            )
            break
        if not ctx.measure_more(step, [incumbent, candidate], f"{tag or candidate.config_id}-{bought + 1}"):
            stop = getattr(ctx, "_budget_reason", "the budget allows no more")
            break
        bought += 1
        j = judge(incumbent, candidate, t, objective, prior)
    unsettled = j.verdict == "undecided"
    runs = runs_per_side()
    need = repeats_to_decide(j.cmp, j.keys, runs) if unsettled and j.cmp is not None else None
    if unsettled:
        j = judge(incumbent, candidate, t, objective, prior, settled=True)
    notes = []
    if confirm:
        outcome = (
            "the repeat confirmed it"
            if j.verdict == "worse"
            else "the repeat did not confirm it, so it is not worse beyond noise"
        )
        notes.append(
            "Worse than the side the guides keep on one run per side: bought a confirming interleaved repeat of "
            f"both sides (2 engine starts), and {outcome}"
        )
    elif confirm_stop:
        notes.append(f"Worse on one run per side, not confirmed by a repeat ({confirm_stop})")
    more = bought - confirm
    if more:
        notes.append(
            f"{'Undecided after it' if confirm else 'Undecided at first'}: bought {more} more interleaved "
            f"repeat{'s' if more > 1 else ''} of both sides ({2 * more} engine starts)"
        )
    if bought:
        notes[-1] += f", now {runs} runs per side"
    if unsettled:
        cost = (
            (
                f"; deciding it would take about {need} runs per side ({2 * max(0, need - runs)} more engine starts: raise "
                "measure.evidence_repeats or measure.duration_s)"
            )
            if need
            else ""
        )
        notes.append(f"Still not beyond noise ({stop}): settled as no measured difference{cost}")
    j.evidence = bought
    j.against = list(incumbent.cell_ids)
    j.evidence_note = ". ".join(notes) + ("." if notes else "")
    return quality_guard(ctx, incumbent, candidate, j)


def quality_guard(ctx: Any, incumbent: Measurement, candidate: Measurement, j: Judgement) -> Judgement:
    """A candidate the tune file's quality gate fails is never taken, whichever step judges it
    (harness.quality.gate: a failed verdict is never ranked best), since `harness compare` of the
    two cells prints the same verdict and exits 1. Found on an H100: prefix caching and a 512-token
    budget changed 14 of 16 greedy outputs of a random-weight model, and the tune took both while
    only its kv-dtype and speculative steps read the gate. Without a quality block, or without
    outputs on both sides, the judgement stands."""
    if j.verdict != "better" or getattr(ctx.tune, "quality", None) is None:
        return j
    v = quality_verdict(ctx, incumbent, candidate)
    if v is None or not v.failed:  # no outputs to judge: refusal(None) would refuse, the judgement stands
        return j
    j.verdict, j.rule = "worse", "quality"
    j.why = f"{refusal(v)}; it would have been taken: {j.why}"
    return j


#: said once in the reason of every step that judged a candidate without an SLO
NO_SLO_NOTE = (
    "No SLO in the tune file or the scenarios: goodput is plain throughput, so requests/s is the guard and "
    "the step is judged on the metrics its guide entry names (shown above), not on a latency limit."
)


def no_slo_note(result: StepResult) -> StepResult:
    """`result` with NO_SLO_NOTE appended when one of its candidates was judged with requests/s as
    the guard (the runs' scenarios set no SLO): a reader must not take a latency change judged on
    its own interval for a goodput decision, nor wonder why a loose default limit did not make it a tie."""
    judged = [sc for row in result.tried for sc in ((row.get("vs_current") or {}).get("per_scenario") or {}).values()]
    if judged and all(sc.get("metric") == THROUGHPUT for sc in judged) and NO_SLO_NOTE not in result.reason:
        result.reason = f"{result.reason.rstrip()} {NO_SLO_NOTE}"
    return result


def dead(results: list[tuple[Any, Measurement, Judgement | None]]) -> list[tuple[Any, Measurement]]:
    """Candidates without a complete run: the engine did not start, died, or the run failed."""
    return [(v, m) for v, m, _ in results[1:] if not m.ok]


def failed_step(
    ctx: Any,
    step: str,
    flag: str,
    results: list[tuple[Any, Measurement, Judgement | None]],
    tried: list[dict[str, Any]],
) -> StepResult:
    """A dead candidate is a failed candidate: the step fails with the engine's error (the
    current flags stay) and `--resume` measures it again, since its cells are not complete."""
    bits = [f"{label({flag: v})}: {m.failure_kind()} ({m.failure or 'no reason recorded'})" for v, m in dead(results)]
    return StepResult(
        step,
        "failed",
        f"{'; '.join(bits)}. A candidate that cannot be measured fails the step: the current "
        "flags stay, and `harness tune FILE --resume DIR` measures it again.",
        dict(ctx.current),
        tried,
    )


def one_flag(
    ctx: Any,
    step: str,
    flag: str,
    values: list[Any],
    disqualify: Callable[[Measurement], str | None] | None = None,
    accept_tie_when: Callable[[Measurement, Measurement], str | None] | None = None,
    suffix: str = "",
    objective: Objective = GOODPUT_ONLY,
    prior: Callable[[Any], str] = lambda _value: "incumbent",
    rank: Callable[[Measurement], float] | None = None,
) -> tuple[StepResult | None, Measurement | None, list[tuple[Any, Measurement, Judgement | None]]]:
    """Measure the current best and `flag` at each of `values` (the others held), pick the
    candidate that beats the current best by the step's objective and prior (harness.tune.judge).

    Returns (a finished StepResult when nothing could be measured or a candidate failed, else
    None; the winner or None; every (value, measurement, judgement)). Candidates are judged best
    first by `rank` (default goodput); undecided ones buy evidence (settle) until one wins.
    `suffix` names a second sweep of the same step (a later round of candidates; the incumbent is
    reused, not started again). `disqualify` names why a candidate may not win (a storm);
    `accept_tie_when` names why a tie may still be taken (it removes a storm)."""
    current = ctx.current
    # the engine kind's knob turns a value into its flags (one, or several: llama.cpp's K and V
    # cache types) and reads it back (harness.engines.parts.flags.Knob)
    knob = ctx.knob_of(flag)
    sets = [current] + [merged(current, knob.change(v, current)) for v in values]
    sets_unique = list({flags_key(s): s for s in sets}.values())
    ms = ctx.measure(step, sets_unique, suffix=suffix)
    if ms is None:
        return ctx.budget_skip(step), None, []
    inc = ms[0]
    results: list[tuple[Any, Measurement, Judgement | None]] = [(knob.value(current), inc, None)]
    for s, m in zip(sets_unique[1:], ms[1:], strict=True):
        results.append((knob.value(s), m, None))
    if dead(results):
        return failed_step(ctx, step, flag, results, [tried_row(m) for _, m, _ in results]), None, results
    key = rank or (lambda m: m.goodput() or -1.0)
    order = sorted(range(1, len(results)), key=lambda i: -key(results[i][1]))
    best: Measurement | None = None
    for i in order:
        value, m, _ = results[i]
        if disqualify is not None and disqualify(m):
            results[i] = (value, m, judge(inc, m, ctx.threshold_pct, objective, prior(value), settled=True))
            continue
        if best is not None:  # judged for the record, no evidence bought once a winner is known
            results[i] = (value, m, judge(inc, m, ctx.threshold_pct, objective, prior(value), settled=True))
            continue
        j = settle(ctx, step, inc, m, objective, prior(value))
        results[i] = (value, m, j)
        if j.verdict == "better" or (j.verdict == "tie" and accept_tie_when is not None and accept_tie_when(inc, m)):
            best = m
    return None, best, results
