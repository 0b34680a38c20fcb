"""Quality verdicts as text lines (CLI, compare, sweep notes)."""

from __future__ import annotations

from harness.quality.gate import QualityVerdict


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def verdict_lines(v: QualityVerdict, against: str | None = None) -> list[str]:
    lines = []
    head = {
        "baseline": "reference",
        "pass": "PASS",
        "fail": "FAIL",
        "engine-problem": "ENGINE PROBLEM",
        "not-judged": "not judged",
    }[v.status]
    lines.append(f"quality verdict [{v.config}]: {head}" + (f" (vs {against})" if against else ""))
    a = v.agreement
    if a is not None and a.n:
        div = ", ".join(f"{k}: {n}" for k, n in a.first_divergence.items()) or "none"
        lines.append(
            f"  agreement: {a.exact}/{a.n} exact ({_pct(a.exact_rate)}), mean common prefix "
            f"{a.mean_common_prefix:.1f} of {a.mean_baseline_tokens:.1f} {a.unit}; first divergence at {div}"
        )
        if a.mean_abs_logprob_diff is not None:
            kl = f", KL~{a.kl:.4f}" if a.kl is not None else ""
            lines.append(
                f"  log-probs on the common prefix: mean |diff| {a.mean_abs_logprob_diff:.4f}, "
                f"mean delta {a.mean_logprob_delta:+.4f} over {a.logprob_tokens} tokens{kl}"
            )
    if v.accuracy is not None:
        acc = v.accuracy
        lines.append(
            f"  accuracy: {acc.right}/{acc.n} ({_pct(acc.rate)}, {_pct(acc.low)}-{_pct(acc.high)})"
            + (f" vs baseline {_pct(v.baseline_accuracy.rate)}" if v.baseline_accuracy else "")
        )
    if v.drop is not None:
        d = v.drop
        need = f"; ~{v.prompts_needed} prompts decide a drop of the gate's size" if v.prompts_needed else ""
        lines.append(
            f"  accuracy drop: {100 * d.drop:+.1f} points [{100 * d.low:+.1f}, {100 * d.high:+.1f}] "
            f"({d.lost} lost, {d.gained} gained of {d.n}){need}"
        )
    lines += [f"  - {r}" for r in v.reasons]
    return lines
