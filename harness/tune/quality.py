"""The seam to the quality gate (harness.quality): a candidate's greedy outputs judged against the
current best's, for the steps that change numerics (kv-dtype / quantization) or must not
(speculative decoding: lossless under greedy decoding).

Every tune sweep runs the quality pass once per config when the tune file has a `quality:`
block (harness.tune.measure), so the current best's outputs are there whichever step measured
it; a step calls `verdict(ctx, current, candidate)` and refuses a candidate whose verdict failed.
"""

from __future__ import annotations

from typing import Any

from harness.quality.dataset import load_quality_set
from harness.quality.gate import QualityVerdict, expects_lossless, judge
from harness.tune.measure import Measurement, flag_of


def gate_available() -> bool:
    return True


def verdict(ctx: Any, current: Measurement, cand: Measurement) -> QualityVerdict | None:
    """`cand` judged against `current` by the tune file's gate; None without a block or outputs."""
    spec = ctx.tune.quality
    if spec is None:
        return None
    base, run = current.quality_run(), cand.quality_run()
    if base is None or run is None:
        return None
    qset = load_quality_set(spec.prompts, ctx.spec.source.parent)
    varied = {k: v for k, v in cand.flags.items() if flag_of(current.flags, k) != v}
    return judge(
        cand.config_id, qset, base, run, spec.gate, lossless=expects_lossless(varied), confidence=spec.confidence
    )


def refusal(v: QualityVerdict | None) -> str | None:
    """Why a candidate may not win on quality grounds (None: it may)."""
    if v is None:
        return "quality not measured (no greedy outputs)"
    if v.failed:
        return f"quality gate {v.status.upper()} ({v.short()}): " + "; ".join(v.reasons)
    return None


def row(v: QualityVerdict | None) -> dict[str, Any] | None:
    """The `quality` field of a tune.json `tried` entry."""
    if v is None:
        return None
    a = v.agreement
    return {
        "status": v.status,
        "passed": v.passed,
        "short": v.short(),
        "reasons": v.reasons,
        "exact_agreement": a.exact_rate if a else None,
        "accuracy": v.accuracy.rate if v.accuracy else None,
        "accuracy_drop": v.drop.drop if v.drop else None,
    }
