"""Step 11, final: the complete production-like benchmark on the chosen flags, measured afresh
(not reused from a step), compared with the baseline by the noise-aware `harness compare`."""

from __future__ import annotations

from typing import Any

from harness.report.compare import Options, compare_runs
from harness.report.data import load_run
from harness.report.metrics import resolve
from harness.tune.judge import judge
from harness.tune.measure import Measurement
from harness.tune.steps.base import STEPS, StepResult, fmt, tried_row

MAIN = ("goodput_rps", "rps", "ttft.p99", "itl.p99", "e2e.p99")


def vs_baseline(base: Measurement, final: Measurement, threshold_pct: float) -> dict[str, Any]:
    j = judge(base, final, threshold_pct)
    per: dict[str, Any] = {}
    regressions = []
    for s in base.scenarios:
        b = [load_run(p) for p in base.run_dirs(s)]
        c = [load_run(p) for p in final.run_dirs(s)]
        if not b or not c:
            continue
        rows = compare_runs(b, c, resolve(None), Options(threshold_pct=threshold_pct))
        per[s] = {r.key: {"baseline": r.baseline, "final": r.candidate, "change": r.change, "unit": r.change_unit,
                          "verdict": r.verdict, "interval": list(r.interval) if r.interval else None}
                  for r in rows if r.key in MAIN or r.verdict in ("REGRESSION", "improved")}
        regressions += [f"{s}: {r.label}" for r in rows if r.verdict == "REGRESSION"]
    if j.verdict == "better":
        verdict = "better"
    elif j.verdict == "worse":
        verdict = "worse"
    else:
        verdict = "same"
    return {"verdict": verdict, "goodput": j.per_scenario, "by": j.by, "regressions": regressions, "deltas": per}


class Final:
    name = "final"
    summary = "the full benchmark on the chosen flags, afresh, compared with the baseline (noise-aware compare)"

    def run(self, ctx) -> StepResult:  # type: ignore[no-untyped-def]
        ms = ctx.measure(self.name, [ctx.current], fresh=True)
        if ms is None:
            return ctx.budget_skip(self.name)
        (m,) = ms
        if not m.ok:
            return StepResult(self.name, "failed", f"the chosen flags did not give a complete run: {m.failure}", dict(ctx.current), [tried_row(m)])
        base = ctx.baseline
        if base is None:
            return StepResult(self.name, "kept", "no baseline to compare with.", dict(ctx.current), [tried_row(m)])
        vs = vs_baseline(base, m, ctx.threshold_pct)
        ctx.final = m
        ctx.vs_baseline = vs
        # where the time slices were too short for the requests, the per-request test decided: say so
        g = "; ".join(f"{s}: goodput {fmt(r['baseline'])} -> {fmt(r['candidate'])} req/s ({r['change_pct']:+.1f}%, {r['compare_verdict']}"
                      + (f" by time slices; decided by {r['closed_loop']}" if r.get("closed_loop") else "") + ")"
                      for s, r in vs["goodput"].items() if r.get("change_pct") is not None)
        same = m.flags == base.flags
        word = {"better": "beats the baseline beyond noise", "worse": "is worse than the baseline beyond noise",
                "same": "is within noise of the baseline"}[vs["verdict"]]
        what = "the baseline flags (nothing changed) are" if same else "the chosen flags are"
        word = word.replace("is ", "", 1) if word.startswith("is ") else word
        reason = f"{what} {word}: {g}" if word.startswith(("within", "worse")) else f"{what.rsplit(' ', 1)[0]} {word}: {g}"
        if vs["regressions"]:
            reason += f"; regressions: {', '.join(vs['regressions'])}"
        verdict = "kept" if same else "changed"
        return StepResult(self.name, verdict, reason + ".", dict(ctx.current), [tried_row(m)], {"vs_baseline": vs})


STEPS.add(Final.name, Final())
