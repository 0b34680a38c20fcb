"""Step 8, kv-dtype / quantization: only when memory is the limit.

Objective (guide 000 "Understand KV cache pressure" and "Quantize model weights", guide 001
2.3): capacity and memory, with the quality gate. Memory is the limit when the current best
still preempts or fills the KV cache (>95%) at the expected load. FP8 KV cache (and quantized
checkpoints listed under candidates) change the numbers the model computes, so the guide's rule
holds: quality and throughput are measured together, and a change is accepted only with the
quality gate passed. Prior: the 16-bit default stays unless the candidate shows a measured gain:
fewer preemptions or more goodput beyond noise, or a KV cache (startup log) larger by more than
the threshold with preemptions and goodput not worse beyond noise. Without a quality gate the
step says "quality not checked" and changes nothing. With one, every candidate's greedy outputs
are judged against the current best's (harness/tune/quality.py); a candidate that fails the gate
cannot win however fast it is, and the reason names its agreement and accuracy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.quality.gate import QualityVerdict
from harness.tune.judge import Objective
from harness.tune.measure import Measurement
from harness.tune.quality import gate_available, refusal, row, verdict
from harness.tune.steps.base import STEPS, StepResult, fmt, one_flag, prologue, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

FLAG = "kv-cache-dtype"
OBJECTIVE = Objective(targets=("preemptions",))


def capacity_gain(inc: Measurement, cand: Measurement, threshold_pct: float) -> str | None:
    """The KV cache the startup log reports, larger by more than the threshold (None: not)."""
    a, b = inc.facts.kv_cache_tokens, cand.facts.kv_cache_tokens
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and (b / a - 1) * 100 > threshold_pct:
        return f"KV cache {a:,.0f} -> {b:,.0f} tokens ({(b / a - 1) * 100:+.0f}%, startup log)"
    return None


class KvDtype:
    name = "kv-dtype"
    knobs = (FLAG,)  # the guide knobs it moves (the plan shows each kind's spelling)
    summary = "only when memory is the limit (preemptions or KV > 95%): FP8 KV cache / quantized checkpoints, accepted only with the quality gate passed"

    def run(self, ctx: TuneContext) -> StepResult:
        done, inc = prologue(ctx, self.name, FLAG)
        if done is not None:
            return done
        assert inc is not None  # prologue hands the incumbent back when every check passed
        pre = inc.metric("preemptions") or 0.0
        kv = inc.metric("kv_usage_max")
        signals = f"{pre:.0f} preemptions, KV usage max {fmt(kv)} at {inc.expected_level}"
        if pre == 0 and (kv is None or kv <= 0.95):
            return StepResult(
                self.name, "skipped", f"memory is not the limit: {signals}.", dict(ctx.current), [tried_row(inc)]
            )
        if ctx.tune.quality is None or not gate_available():
            why = (
                "the tune file has no quality block"
                if ctx.tune.quality is None
                else "this build has no quality gate (harness.quality)"
            )
            return StepResult(
                self.name,
                "skipped",
                f"memory is the limit ({signals}), but quality not checked: {why}, and FP8 KV cache "
                "or quantized weights are accepted only with the quality gate passed.",
                dict(ctx.current),
                [tried_row(inc)],
            )
        knob = ctx.knob(FLAG)  # the kind's flag(s) and its spelling of FP8 (llama.cpp: q8_0 for K and V)
        flag = knob.flag or FLAG
        values = ctx.candidates(flag) or list(knob.try_values) or ["fp8"]
        verdicts: dict[str, QualityVerdict | None] = {}

        def quality_refused(m: Measurement) -> str | None:
            verdicts[m.config_id] = v = verdict(ctx, inc, m)
            return refusal(v)

        done, best, results = one_flag(
            ctx,
            self.name,
            flag,
            values,
            disqualify=quality_refused,
            objective=OBJECTIVE,
            accept_tie_when=lambda i, c: capacity_gain(i, c, ctx.threshold_pct),
        )
        if done is not None:
            return done
        for _, m, _ in results[1:]:  # every candidate judged, also those that lost on speed
            if m.config_id not in verdicts and m.ok:
                quality_refused(m)
        tried = [tried_row(m, j, quality=row(verdicts.get(m.config_id))) for _, m, j in results]
        notes = []
        for _, m, _ in results[1:]:
            if m.ok:
                v = verdicts.get(m.config_id)
                refused_why = refusal(v)
                notes.append(
                    f"{knob.value(m.flags)}: "
                    + (refused_why if refused_why else f"quality gate {v.status} ({v.short()})" if v else "-")
                )
        qnotes = "; ".join(notes) or "no candidate measured"
        if best is None:
            return StepResult(
                self.name,
                "kept",
                f"memory is the limit ({signals}); no {flag} in {', '.join(map(str, values))} beats the "
                f"current one beyond noise with the quality gate passed. Quality vs current: {qnotes}.",
                dict(ctx.current),
                tried,
            )
        ctx.current = best.flags
        j = next(jj for _, m, jj in results if m is best)
        assert j is not None  # the best was judged against the current one
        gain = capacity_gain(inc, best, ctx.threshold_pct)
        why = j.text() if j.verdict == "better" else f"{j.text()}; taken for capacity: {gain}"
        return StepResult(
            self.name,
            "changed",
            f"memory is the limit ({signals}); {flag} {knob.value(best.flags)}: {why}; "
            f"it passes the quality gate. Quality vs current: {qnotes}.",
            dict(best.flags),
            tried,
        )


STEPS.add(KvDtype.name, KvDtype())
