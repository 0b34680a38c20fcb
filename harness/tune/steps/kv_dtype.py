"""Step 8, kv-dtype / quantization: only when memory is the limit.

Memory is the limit when the current best still preempts or fills the KV cache (>95%) at the
expected load. FP8 KV cache (and quantized checkpoints listed under candidates) change the
numbers the model computes, so the guide's rule holds: quality and throughput are measured
together, and a change is accepted only with the quality gate passed. Without a quality gate the
step says "quality not checked" and changes nothing.
"""

from __future__ import annotations

from harness.tune.quality import gate_available
from harness.tune.steps.base import STEPS, StepResult, fmt, one_flag, tried_row

FLAG = "kv-cache-dtype"


class KvDtype:
    name = "kv-dtype"
    summary = "only when memory is the limit (preemptions or KV > 95%): FP8 KV cache / quantized checkpoints, accepted only with the quality gate passed"

    def run(self, ctx) -> StepResult:  # type: ignore[no-untyped-def]
        lacks = ctx.lacks(self.name, FLAG)
        if lacks is not None:
            return lacks
        inc = ctx.incumbent()
        if inc is None or not inc.ok:
            return StepResult(self.name, "skipped", "no measurement of the current flags", dict(ctx.current))
        pre = inc.metric("preemptions") or 0.0
        kv = inc.metric("kv_usage_max")
        signals = f"{pre:.0f} preemptions, KV usage max {fmt(kv)} at {inc.expected_level}"
        if pre == 0 and (kv is None or kv <= 0.95):
            return StepResult(self.name, "skipped", f"memory is not the limit: {signals}.", dict(ctx.current), [tried_row(inc)])
        if ctx.tune.quality is None or not gate_available():
            why = "the tune file has no quality block" if ctx.tune.quality is None else "this build has no quality gate (harness.quality)"
            return StepResult(self.name, "skipped", f"memory is the limit ({signals}), but quality not checked: {why}, and FP8 KV cache "
                              "or quantized weights are accepted only with the quality gate passed.", dict(ctx.current), [tried_row(inc)])
        values = ctx.candidates(FLAG) or ["fp8"]
        done, best, results = one_flag(ctx, self.name, FLAG, values)
        if done is not None:
            return done
        tried = [tried_row(m, j) for _, m, j in results]
        if best is None:
            return StepResult(self.name, "kept", f"memory is the limit ({signals}); {', '.join(map(str, values))} does not beat the current "
                              "KV cache dtype beyond noise.", dict(ctx.current), tried)
        ctx.current = best.flags
        return StepResult(self.name, "changed", f"memory is the limit ({signals}); {FLAG} {best.flags.get(FLAG)} beats it beyond noise.",
                          dict(best.flags), tried)


STEPS.add(KvDtype.name, KvDtype())
