"""The quality gate's KL limit on hand-made outputs: a flip at the first token is where the
distributions differ, so it is measured there (the log-prob difference on the common prefix sees
nothing); identical distributions pass; a server without top log-probs is not judged; and a gate
that asks for KL without top log-probs is refused when the file is read."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.quality import judge
from harness.quality.dataset import QualityPrompt, QualitySet
from harness.quality.runner import QualityOutput, QualityRun
from harness.scenario.quality import QualityGate, QualitySpec

QSET = QualitySet(
    path=Path("q.jsonl"),
    sha256="x",
    prompts=[QualityPrompt(id="p0", prompt="hi", messages=None, expected=None, match="exact", max_tokens=None)],
)


def run(tokens: list[str], tops: list[dict[str, float]] | None) -> QualityRun:
    lps = [tops[i][t] if tops else -1.0 for i, t in enumerate(tokens)]
    out = QualityOutput(id="p0", text="".join(tokens), tokens=tokens, logprobs=lps, top_logprobs=tops)
    return QualityRun([out], prompts_sha256="x", model="m", target="t", max_tokens=4, logprobs=True)


def dist(a: float, b: float) -> dict[str, float]:
    """log-probs of two tokens "a" and "b" (the rest of the mass elsewhere)."""
    return {"a": math.log(a), "b": math.log(b)}


def test_a_flip_at_the_first_token_is_measured_there_and_fails_the_kl_limit():
    base = run(["a", "a"], [dist(0.9, 0.05), dist(0.9, 0.05)])
    cand = run(["b", "a"], [dist(0.3, 0.6), dist(0.9, 0.05)])  # sharply different at position 0
    v = judge("c", QSET, base, cand, QualityGate(max_kl=0.01))
    assert v.agreement is not None and v.agreement.logprob_tokens == 0  # the common prefix is empty
    assert v.agreement.kl_tokens == 1 and v.agreement.kl is not None and v.agreement.kl > 0.5
    assert v.status == "fail" and any("KL" in r for r in v.reasons), v.reasons


def test_a_near_tie_flipped_by_numerics_passes_the_kl_limit_and_fails_exact_agreement():
    base = run(["a", "a"], [dist(0.401, 0.400), dist(0.9, 0.05)])
    cand = run(["b", "a"], [dist(0.400, 0.401), dist(0.9, 0.05)])
    kl_only = judge("c", QSET, base, cand, QualityGate(max_kl=0.01))
    assert kl_only.status == "pass", kl_only.reasons
    exact = judge("c", QSET, base, cand, QualityGate(min_exact_agreement=0.95))
    assert exact.status == "fail"


def test_kl_without_top_logprobs_is_not_judged():
    v = judge("c", QSET, run(["a"], None), run(["a"], None), QualityGate(max_kl=0.01))
    assert v.status == "not-judged" and any("top log-probs" in r for r in v.reasons)


def test_a_kl_gate_without_top_logprobs_is_refused_naming_the_fix():
    with pytest.raises(ValidationError, match="top_logprobs to 5-20"):
        QualitySpec(prompts="q.jsonl", gate=QualityGate(max_kl=0.01))
    assert QualitySpec(prompts="q.jsonl", top_logprobs=20, gate=QualityGate(max_kl=0.01)).gate.max_kl == 0.01
