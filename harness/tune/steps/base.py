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
from harness.tune.judge import Judgement, judge
from harness.tune.measure import Measurement, flag_of, flags_key, merged

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
        return {"step": self.step, "verdict": self.verdict, "reason": self.reason, "tried": self.tried,
                "chosen": self.chosen, **({"details": self.details} if self.details else {})}


class Step(Protocol):
    name: str
    #: one line for --plan: what the step does and when it is skipped
    summary: str

    def run(self, ctx: Any) -> StepResult: ...


STEPS: Registry[Step] = Registry("tune step")


NO_MEASUREMENT = "no measurement of the current flags"


def prologue(ctx: Any, step: str, vllm_flag: str, *, incumbent_first: bool = False,
             missing: str = NO_MEASUREMENT) -> tuple[StepResult | None, Measurement | None]:
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
        row["vs_current"] = {"verdict": j.verdict, "by": j.by, "per_scenario": j.per_scenario}
    row.update(extra)
    return row


def one_flag(
    ctx: Any,
    step: str,
    flag: str,
    values: list[Any],
    disqualify: Callable[[Measurement], str | None] | None = None,
    accept_tie_when: Callable[[Measurement, Measurement], str | None] | None = None,
    suffix: str = "",
) -> tuple[StepResult | None, Measurement | None, list[tuple[Any, Measurement, Judgement | None]]]:
    """Measure the current best and `flag` at each of `values` (the others held), pick the
    candidate that beats the current best beyond noise (best goodput first).

    Returns (a finished StepResult when nothing could be measured, else None; the winner or None;
    every (value, measurement, judgement)). `suffix` names a second sweep of the same step (a
    later round of candidates; the incumbent is reused, not started again). `disqualify` names why a candidate may not win (a
    storm); `accept_tie_when` names why a tie may still be taken (it removes a storm)."""
    current = ctx.current
    sets = [current] + [merged(current, {flag: v}) for v in values]
    sets_unique = list({flags_key(s): s for s in sets}.values())
    ms = ctx.measure(step, sets_unique, suffix=suffix)
    if ms is None:
        return ctx.budget_skip(step), None, []
    inc = ms[0]
    results: list[tuple[Any, Measurement, Judgement | None]] = [(flag_of(current, flag), inc, None)]
    for s, m in zip(sets_unique[1:], ms[1:]):
        results.append((flag_of(s, flag), m, judge(inc, m, ctx.threshold_pct)))
    best: Measurement | None = None
    ranked = sorted(results[1:], key=lambda r: -(r[1].goodput() or -1.0) if r[1].ok else 1e18)
    for value, m, j in ranked:
        if not m.ok or j is None:
            continue
        if disqualify is not None and disqualify(m):
            continue
        if j.verdict == "better" or (j.verdict == "tie" and accept_tie_when is not None and accept_tie_when(inc, m)):
            best = m
            break
    return None, best, results
