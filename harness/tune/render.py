"""`harness tune FILE --plan`: the steps it will take and why, nothing started."""

from __future__ import annotations

import shlex
from typing import Any

from harness.engines import get_kind
from harness.sweep.flags import describe
from harness.tune.driver import engine_command
from harness.tune.load import TuneSpec
from harness.tune.steps import STEPS

SKIPPED = "the step is skipped, nothing started"


def render_plan(spec: TuneSpec) -> str:
    t = spec.file
    load = t.load
    lines = [
        f"tune {t.name}: {t.description}".rstrip(": "),
        f"  engine {t.engine.kind}; current flags: {describe(t.base) or '(engine defaults)'}",
        f"  $ {shlex.join(engine_command(spec, dict(t.base)))}",
        f"  workload: {', '.join(p.name for p in spec.scenarios)}",
        f"  expected load: {load.path} = {load.value:g}"
        + (f"; capacity levels {', '.join(f'{v:g}' for v in load.levels()[1:])}" if load.capacity_levels else ""),
        f"  each candidate: {t.measure.duration_s:g} s measured after {t.measure.warmup_s:g} s warmup, {t.measure.repeats} repeat(s); "
        f"a change must beat the current best by > {t.measure.threshold_pct:g}% goodput and beyond noise",
        f"  required context: {spec.max_model_len} tokens ({spec.max_model_len_from})",
        f"  budget: {t.budget.max_starts or 'no'} max starts, {t.budget.max_hours or 'no'} max hours",
        "  steps (one flag at a time, the others at the current best; candidates derived at run time unless listed):",
    ]
    flags = get_kind(t.engine.kind).flags
    for i, name in enumerate(t.step_order(), 1):
        step = STEPS.get(name)
        lines.append(f"   {i:>2}. {name}: {step.summary}")
        for n, guide in enumerate(getattr(step, "knobs", ())):
            lines.append(f"       {knob_line(t.engine.kind, flags.knob(guide), guide, step if n == 0 else None)}")
    if t.candidates:
        lines.append(
            "  candidates from the file: "
            + "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in t.candidates.items())
        )
    return "\n".join(lines)


def knob_line(kind: str, knob: Any, guide: str, step: Any) -> str:
    """What the step moves on this engine kind: its spelling of the guide's knob (and a switch's
    two settings), or why it has none and what the step then does (`step`: the step's own knob)."""
    if knob.flag is None:
        then = getattr(step, "without_knob", SKIPPED) if step is not None else "not moved"
        return f"{guide} -> engine kind {kind} has no equivalent ({knob.why_missing}): {then}"
    if knob.is_switch:
        return f"{guide} -> {kind} {knob.switch_text()}"
    tries = f"; tries {', '.join(map(str, knob.try_values))} unless candidates are listed" if knob.try_values else ""
    return f"{guide} -> {kind} {knob.spelling()}{tries}"
