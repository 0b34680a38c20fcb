"""The quality gate: one config's scores vs the baseline -> a typed verdict with its reasons.

Statuses:
  baseline        the reference config itself (nothing to judge)
  pass            every limit that is set holds (or a drop is within the noise of the prompt count)
  fail            exact agreement below `min_exact_agreement`, a KL divergence from the baseline's
                  next-token distributions above `max_kl`, or an accuracy drop beyond
                  `max_accuracy_drop` with the whole confidence interval above it
  engine-problem  a config that must be lossless under greedy decoding (speculative decoding,
                  nothing precision-related changed) disagrees with the baseline: a bug in the
                  engine, not a quality trade-off
  not-judged      no baseline outputs, the outputs failed to come back, or `max_kl` is set and the
                  server returned no top log-probs
A verdict whose `passed` is False must never be ranked best (sweep tables, tune decisions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from harness.quality.dataset import QualitySet
from harness.quality.runner import QualityRun
from harness.quality.score import Accuracy, AccuracyDrop, Agreement, accuracy, accuracy_drop, agreement
from harness.scenario.quality import QualityGate

Status = Literal["baseline", "pass", "fail", "engine-problem", "not-judged"]

#: flags whose change is lossless under greedy decoding by design: speculative decoding verifies
#: every draft token against the target model (vLLM spellings, with or without dashes)
LOSSLESS_FLAGS = frozenset({"speculative-config", "sc", "num-speculative-tokens", "speculative-model"})
#: flags that change numerics; with one of these varied, disagreement is a trade-off to judge
PRECISION_FLAGS = frozenset({"kv-cache-dtype", "quantization", "q", "dtype", "load-format", "calculate-kv-scales"})


def _flag(name: str) -> str:
    return name.lstrip("-").replace("_", "-")


def expects_lossless(varied: dict[str, Any]) -> bool:
    """True when the config differs from the baseline only by speculative decoding (plus flags
    that do not touch numerics): its greedy outputs must equal the baseline's exactly."""
    names = {_flag(k) for k, v in varied.items()}
    return bool(names & LOSSLESS_FLAGS) and not names & PRECISION_FLAGS


@dataclass
class QualityVerdict:
    config: str
    status: Status
    reasons: list[str] = field(default_factory=list)
    agreement: Agreement | None = None
    accuracy: Accuracy | None = None
    baseline_accuracy: Accuracy | None = None
    drop: AccuracyDrop | None = None
    prompts_needed: int | None = None  # to resolve a drop of the gate's size
    errors: int = 0

    @property
    def passed(self) -> bool:
        return self.status in ("baseline", "pass", "not-judged")

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "engine-problem")

    def short(self) -> str:
        """A table cell: agreement and accuracy, with the verdict mark."""
        parts = []
        if self.agreement is not None and self.agreement.exact_rate is not None:
            parts.append(f"agree {100 * self.agreement.exact_rate:.0f}%")
        if self.agreement is not None and self.agreement.kl is not None:
            parts.append(f"KL {self.agreement.kl:.4f}")
        if self.accuracy is not None and self.accuracy.rate is not None:
            parts.append(f"acc {100 * self.accuracy.rate:.0f}%")
        text = " ".join(parts) or "-"
        mark = {"fail": "FAIL", "engine-problem": "NOT LOSSLESS", "baseline": "ref"}.get(self.status)
        return f"{text} {mark}" if mark else text

    def to_json(self) -> dict[str, Any]:
        margin = None
        return {
            "config": self.config,
            "status": self.status,
            "passed": self.passed,
            "reasons": self.reasons,
            "short": self.short(),
            "agreement": self.agreement.to_json() if self.agreement else None,
            "accuracy": self.accuracy.to_json() if self.accuracy else None,
            "baseline_accuracy": self.baseline_accuracy.to_json() if self.baseline_accuracy else None,
            "accuracy_drop": self.drop.to_json(margin) if self.drop else None,
            "prompts_needed": self.prompts_needed,
            "errors": self.errors,
        }


def judge(
    config: str,
    qset: QualitySet,
    baseline: QualityRun | None,
    candidate: QualityRun,
    gate: QualityGate,
    *,
    lossless: bool = False,
    is_baseline: bool = False,
    confidence: float = 0.95,
) -> QualityVerdict:
    """Score `candidate` against `baseline` and the expected answers; apply `gate`.

    `lossless`: the config must reproduce the baseline exactly (see `expects_lossless`)."""
    acc = accuracy(qset, candidate, confidence)
    errors = candidate.errors
    if is_baseline:
        reasons = [f"{errors} of {len(candidate.outputs)} prompts failed"] if errors else []
        return QualityVerdict(config, "baseline", reasons, accuracy=acc, errors=errors)
    if baseline is None:
        return QualityVerdict(
            config, "not-judged", ["no baseline outputs to compare with"], accuracy=acc, errors=errors
        )
    if baseline.prompts_sha256 and candidate.prompts_sha256 and baseline.prompts_sha256 != candidate.prompts_sha256:
        return QualityVerdict(
            config, "not-judged", ["the baseline answered a different prompt file"], accuracy=acc, errors=errors
        )
    agree = agreement(baseline, candidate)
    base_acc = accuracy(qset, baseline, confidence)
    drop = accuracy_drop(base_acc, acc, confidence) if base_acc and acc else None
    v = QualityVerdict(
        config, "pass", [], agreement=agree, accuracy=acc, baseline_accuracy=base_acc, drop=drop, errors=errors
    )
    if errors:
        v.reasons.append(f"{errors} of {len(candidate.outputs)} prompts failed (counted wrong, left out of agreement)")
    if agree.n == 0:
        v.status = "not-judged"
        v.reasons.append("no prompt answered on both sides")
        return v
    rate = agree.exact_rate or 0.0
    if lossless and agree.exact < agree.n:
        v.status = "engine-problem"
        v.reasons.append(
            f"speculative decoding must be lossless under greedy decoding, but {agree.n - agree.exact} of "
            f"{agree.n} outputs differ from the baseline (first at prompt {agree.diverged_ids[0]}): "
            "an engine problem, not a quality trade-off (a defect, or the speculative path's kernel shapes "
            "changing floating-point results enough to flip near-tied greedy tokens, which a model with "
            "random weights has everywhere; a trained model tells the two apart)"
        )
    if gate.min_exact_agreement is not None and rate < gate.min_exact_agreement:
        if v.status == "pass":
            v.status = "fail"
        v.reasons.append(
            f"exact agreement {100 * rate:.1f}% < {100 * gate.min_exact_agreement:g}% "
            f"({agree.n - agree.exact} of {agree.n} outputs differ)"
        )
    if gate.max_kl is not None:
        if agree.kl is None:
            if v.status == "pass":
                v.status = "not-judged"
            v.reasons.append("KL not measured: the server returned no top log-probs on both sides")
        elif agree.kl > gate.max_kl:
            if v.status == "pass":
                v.status = "fail"
            v.reasons.append(
                f"KL {agree.kl:.4f} nats/token > {gate.max_kl:g} ({agree.kl_tokens} positions with the same text)"
            )
    if drop is not None and gate.max_accuracy_drop is not None:
        limit = gate.max_accuracy_drop
        v.prompts_needed = drop.prompts_needed(limit) if limit > 0 else None
        pct = f"{100 * drop.drop:+.1f} points [{100 * drop.low:+.1f}, {100 * drop.high:+.1f}]"
        if drop.low > limit:
            if v.status == "pass":
                v.status = "fail"
            v.reasons.append(f"accuracy drop {pct} > {100 * limit:g} points (beyond the noise of {drop.n} prompts)")
        elif drop.drop > limit:
            need = (
                f"; about {v.prompts_needed} prompts would decide a drop of {100 * limit:g} points"
                if v.prompts_needed
                else ""
            )
            v.reasons.append(
                f"accuracy drop {pct} is above {100 * limit:g} points but within the noise of {drop.n} prompts{need}"
            )
    return v


def judge_all(
    qset: QualitySet,
    runs: dict[str, QualityRun],
    baseline_id: str,
    gate: QualityGate,
    *,
    varied: dict[str, dict[str, Any]] | None = None,
    confidence: float = 0.95,
) -> dict[str, QualityVerdict]:
    """A verdict per config (`runs`: config id -> its outputs); `varied`: config id -> the flags that
    differ from the baseline config (decides which configs must be lossless)."""
    base = runs.get(baseline_id)
    out = {}
    for cid, run in runs.items():
        out[cid] = judge(
            cid,
            qset,
            base,
            run,
            gate,
            lossless=expects_lossless((varied or {}).get(cid, {})),
            is_baseline=cid == baseline_id,
            confidence=confidence,
        )
    return out
