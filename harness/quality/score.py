"""Scores of one config's greedy outputs: against the baseline config's, and against the answers.

Agreement (token level, on the prompts both sides answered): the share of outputs identical to
the baseline's, the mean length of the common token prefix, where the first divergence falls,
and, where the server returned log-probs, the mean per-token log-prob difference on the common
prefix (the baseline's tokens, which the candidate chose too) and, with top_logprobs on both
sides, an approximate per-token KL(baseline || candidate) over the baseline's top tokens.

Accuracy (prompts with expected answers): the share right with a Wilson interval, and the drop
vs the baseline as a paired difference (the same prompts on both sides) with a normal interval
from the discordant pairs. `prompts_needed(margin)` says how many prompts would resolve a
difference of that size at the chosen confidence.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

from harness.quality.dataset import QualitySet
from harness.quality.matching import is_right
from harness.quality.runner import QualityOutput, QualityRun

#: first-divergence histogram buckets (token positions), as labels in order
DIVERGENCE_BUCKETS = ((0, 0), (1, 1), (2, 3), (4, 7), (8, 15), (16, 31), (32, 63), (64, 127), (128, None))


def _label(lo: int, hi: int | None) -> str:
    return f"{lo}+" if hi is None else (str(lo) if lo == hi else f"{lo}-{hi}")


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def tokens_of(o: QualityOutput) -> list[str]:
    """The server's tokens when it sent log-probs; else the text's whitespace-separated words."""
    return list(o.tokens) if o.tokens is not None else o.text.split()


def common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):  # the prefix the shorter list shares
        if x != y:
            break
        n += 1
    return n


@dataclass
class Agreement:
    n: int  # prompts compared (answered on both sides)
    exact: int  # outputs identical to the baseline's
    mean_common_prefix: float  # tokens
    mean_baseline_tokens: float
    first_divergence: dict[str, int]  # position bucket -> prompts whose first differing token is there
    unit: str  # "tokens" (server tokens from log-probs) or "words" (no log-probs: whitespace words)
    mean_abs_logprob_diff: float | None = None  # |lp_base - lp_cand| per common-prefix token
    mean_logprob_delta: float | None = None  # lp_cand - lp_base (negative: the candidate is less sure)
    logprob_tokens: int = 0
    kl: float | None = None  # approx. per-token KL(baseline || candidate) from top_logprobs, positions 0..k
    kl_tokens: int = 0
    diverged_ids: list[str] = field(default_factory=list)

    @property
    def exact_rate(self) -> float | None:
        return self.exact / self.n if self.n else None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["exact_rate"] = self.exact_rate
        d["diverged_ids"] = self.diverged_ids[:50]
        return d


def agreement(baseline: QualityRun, candidate: QualityRun) -> Agreement:
    """Token-level agreement of `candidate` with `baseline` on the prompts both answered."""
    base = baseline.by_id()
    pairs = [(base[o.id], o) for o in candidate.outputs if o.id in base and not o.error and not base[o.id].error]
    unit = "tokens" if pairs and all(b.tokens is not None and c.tokens is not None for b, c in pairs) else "words"
    hist = {_label(lo, hi): 0 for lo, hi in DIVERGENCE_BUCKETS}
    exact = 0
    prefix_sum = base_len = 0
    lp_abs = lp_delta = 0.0
    lp_n = 0
    kl_sum, kl_n = 0.0, 0
    diverged: list[str] = []
    for b, c in pairs:
        tb = b.tokens if unit == "tokens" else b.text.split()
        tc = c.tokens if unit == "tokens" else c.text.split()
        assert tb is not None and tc is not None
        k = common_prefix(tb, tc)
        same = tb == tc if unit == "tokens" else b.text == c.text
        prefix_sum += k
        base_len += len(tb)
        if same:
            exact += 1
        else:
            diverged.append(c.id)
            for lo, hi in DIVERGENCE_BUCKETS:
                if k >= lo and (hi is None or k <= hi):
                    hist[_label(lo, hi)] += 1
                    break
        if b.logprobs is not None and c.logprobs is not None:
            m = min(k, len(b.logprobs), len(c.logprobs))
            for i in range(m):
                d = c.logprobs[i] - b.logprobs[i]
                lp_abs += abs(d)
                lp_delta += d
            lp_n += m
            if b.top_logprobs and c.top_logprobs:
                # positions 0..k saw the same text on both sides, so their next-token distributions
                # compare, the first differing position included: that is where a flip shows
                for i in range(min(k + 1, len(b.top_logprobs), len(c.top_logprobs))):
                    kl = _kl_top(b.top_logprobs[i], c.top_logprobs[i])
                    if kl is not None:
                        kl_sum += kl
                        kl_n += 1
    n = len(pairs)
    return Agreement(
        n=n,
        exact=exact,
        mean_common_prefix=prefix_sum / n if n else 0.0,
        mean_baseline_tokens=base_len / n if n else 0.0,
        first_divergence={k: v for k, v in hist.items() if v},
        unit=unit,
        mean_abs_logprob_diff=lp_abs / lp_n if lp_n else None,
        mean_logprob_delta=lp_delta / lp_n if lp_n else None,
        logprob_tokens=lp_n,
        kl=kl_sum / kl_n if kl_n else None,
        kl_tokens=kl_n,
        diverged_ids=diverged,
    )


def _kl_top(pb: dict[str, float], pc: dict[str, float]) -> float | None:
    """sum over the baseline's top tokens of p_b (log p_b - log p_c); a token missing from the
    candidate's top list gets the candidate's lowest listed log-prob (an upper bound on p_c)."""
    if not pb or not pc:
        return None
    floor = min(pc.values())
    return max(0.0, sum(math.exp(lb) * (lb - pc.get(t, floor)) for t, lb in pb.items()))


@dataclass
class Accuracy:
    n: int  # prompts with expected answers that were answered
    right: int
    low: float  # Wilson interval
    high: float
    right_ids: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float | None:
        return self.right / self.n if self.n else None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rate"] = self.rate
        d.pop("right_ids")
        return d


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    z = _z(confidence)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def accuracy(qset: QualitySet, run: QualityRun, confidence: float = 0.95) -> Accuracy | None:
    """Expected-answer accuracy of `run`, or None when no prompt has an expected answer.
    A prompt the server failed to answer counts as wrong (it was asked and not answered)."""
    outs = run.by_id()
    scored = [p for p in qset.prompts if p.expected is not None and p.id in outs]
    if not scored:
        return None
    right = [p.id for p in scored if not outs[p.id].error and is_right(outs[p.id].text, p.expected or (), p.match)]
    low, high = wilson(len(right), len(scored), confidence)
    return Accuracy(n=len(scored), right=len(right), low=low, high=high, right_ids=right)


@dataclass
class AccuracyDrop:
    """baseline accuracy - candidate accuracy on the same prompts (positive = worse)."""

    n: int
    baseline_rate: float
    candidate_rate: float
    drop: float
    low: float
    high: float
    confidence: float
    lost: int  # right on the baseline, wrong on the candidate
    gained: int  # the reverse

    def prompts_needed(self, margin: float) -> int | None:
        """Prompts for an interval of half-width `margin` (a drop of that size told from none),
        from the observed disagreement (or, with none observed, the baseline's binomial spread)."""
        if margin <= 0:
            return None
        z = _z(self.confidence)
        p_disc = (self.lost + self.gained) / self.n if self.n else 0.0
        var1 = p_disc - self.drop**2 if p_disc > 0 else 2 * self.baseline_rate * (1 - self.baseline_rate)
        var1 = max(var1, margin)  # never claim fewer than z^2/margin prompts: nothing observed is not proof
        return math.ceil(z * z * var1 / (margin * margin))

    def to_json(self, margin: float | None = None) -> dict[str, Any]:
        d = asdict(self)
        if margin:
            d["prompts_needed"] = self.prompts_needed(margin)
        return d


def accuracy_drop(base: Accuracy, cand: Accuracy, confidence: float = 0.95) -> AccuracyDrop | None:
    if not base.n or not cand.n:
        return None
    b_right, c_right = set(base.right_ids), set(cand.right_ids)
    n = min(base.n, cand.n)
    lost = len(b_right - c_right)
    gained = len(c_right - b_right)
    d = (lost - gained) / n
    se = math.sqrt(max(0.0, (lost + gained) / n - d * d) / n)
    z = _z(confidence)
    return AccuracyDrop(
        n=n,
        baseline_rate=len(b_right) / n,
        candidate_rate=len(c_right) / n,
        drop=d,
        low=d - z * se,
        high=d + z * se,
        confidence=confidence,
        lost=lost,
        gained=gained,
    )
