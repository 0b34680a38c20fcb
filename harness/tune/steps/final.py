"""Step 11, final: the complete production-like benchmark on the chosen flags, measured afresh
(not reused from a step), compared with the baseline by `harness compare`'s noise tests.

The verdict tells the whole story (guide 000: "Repeat the complete production-like benchmark"
and record every value): every metric that moved beyond noise, improvements and regressions
alike, with its interval (the default family of `harness compare` plus the engine's preemptions
and prefix hits), then what did not move (goodput within noise), then the KV occupancy, the SLO
attainment and the GPU memory of both runs. A clause with nothing in it is left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.tune.judge import compare_measurements, guard_name, judge, show_row
from harness.tune.measure import Measurement, flags_key
from harness.tune.quality import row as quality_row
from harness.tune.quality import verdict as quality_verdict
from harness.tune.steps.base import STEPS, StepResult, fmt, tried_row

if TYPE_CHECKING:
    from harness.tune.context import TuneContext

MAIN = ("goodput_rps", "rps", "ttft.p99", "itl.p99", "e2e.p99")


def facts(base: Measurement, final: Measurement) -> list[str]:
    """KV occupancy, SLO attainment and GPU memory of both runs (engine gauges: no interval)."""
    out = []

    def pair(a: float | None, b: float | None, spec: str, unit: str = "") -> str | None:
        if a is None and b is None:
            return None
        return f"{fmt(a, spec)}{unit if a is not None else ''} -> {fmt(b, spec)}{unit if b is not None else ''}"

    kv = [
        (name, base.summary_value(get), final.summary_value(get))
        for name, get in (("mean", lambda s: s.engine.kv_usage.mean), ("max", lambda s: s.engine.kv_usage.max))
    ]
    kv_bits = [f"{n} {pair(a, b, '.2f')}" for n, a, b in kv if a is not None or b is not None]
    if kv_bits:
        out.append("KV usage " + ", ".join(kv_bits))
    att = pair(_pct(base.metric("goodput_fraction")), _pct(final.metric("goodput_fraction")), ".0f", "%")
    if att and base.metric("goodput_req_per_s") is not None:
        out.append(f"requests within the SLOs {att}")
    hits = [m.metric("prefix_hit_rate") for m in (base, final)]
    if any(h is not None for h in hits):
        pct = [None if h is None else 100 * h for h in hits]
        out.append(f"prefix-cache hit rate {pair(pct[0], pct[1], '.0f', '%')}")
    gb = [m.summary_value(lambda s: s.engine.gpu_memory.used_max_bytes) for m in (base, final)]
    if any(gb):
        gib = [None if b is None else b / 2**30 for b in gb]
        out.append(f"GPU memory {pair(gib[0], gib[1], '.1f', ' GiB')}")
    return out


def _pct(v: float | None) -> float | None:
    return None if v is None else 100.0 * v


def vs_baseline(base: Measurement, final: Measurement, threshold_pct: float) -> dict[str, Any]:
    j = judge(base, final, threshold_pct, settled=True)
    cmp = compare_measurements(base, final, threshold_pct)
    multi = len(cmp.rows) > 1
    improved, regressed, per = [], [], {}
    for s, rows in cmp.rows.items():
        per[s] = {
            r.key: {
                "baseline": r.baseline,
                "final": r.candidate,
                "change": r.change,
                "unit": r.change_unit,
                "verdict": r.verdict,
                "interval": list(r.interval) if r.interval else None,
                "p_adjusted": r.p_adjusted,
            }
            for r in rows.values()
            if r.key in MAIN or r.decided
        }
        for r in rows.values():
            if r.key == "prefix_hit_rate":
                continue  # a fact, not better or worse: a preempted request's recompute hits the cache too
            text = (f"{s}: " if multi else "") + show_row(r)
            if r.verdict == "improved":
                improved.append(text)
            elif r.verdict == "REGRESSION":
                regressed.append(text)
    if improved and regressed:
        verdict = "mixed"
    elif improved:
        verdict = "better"
    elif regressed:
        verdict = "worse"
    else:
        verdict = "same"
    guard = cmp.guard
    steady = [
        (f"{s}: " if multi else "") + show_row(rows[guard], cmp.closed_loop.get(s))
        for s, rows in cmp.rows.items()
        if guard in rows and not rows[guard].decided
    ]
    # what moved past the threshold without getting beyond noise: worth a line, not a verdict
    unsure = [
        (f"{s}: " if multi else "") + show_row(r)
        for s, rows in cmp.rows.items()
        for r in rows.values()
        if r.key != guard and r.key != "prefix_hit_rate" and r.verdict in ("within noise", "too few samples")
    ]
    return {
        "verdict": verdict,
        "goodput": j.per_scenario,
        "by": j.by,
        "guard": guard_name(guard),
        "improvements": improved,
        "regressions": regressed,
        "within_noise": steady,
        "undecided": unsure,
        "facts": facts(base, final),
        "deltas": per,
    }


def story(vs: dict[str, Any]) -> str:
    """The verdict's sentence: every clause that has something in it."""
    parts = []
    if vs["improvements"]:
        parts.append("better beyond noise: " + "; ".join(vs["improvements"]))
    if vs["regressions"]:
        parts.append("worse beyond noise: " + "; ".join(vs["regressions"]))
    if vs["within_noise"]:
        parts.append(f"{vs['guard'].split(' (')[0]} within noise: " + "; ".join(vs["within_noise"]))
    if vs.get("undecided"):
        parts.append("beyond the threshold but not beyond noise (no verdict): " + "; ".join(vs["undecided"]))
    if vs["facts"]:
        parts.append("; ".join(vs["facts"]))
    return ". ".join(p[0].upper() + p[1:] for p in parts)


def drift(earlier: Measurement | None, final: Measurement, threshold_pct: float) -> str | None:
    """The chosen flags were measured before, by the step that chose them; measured again here they
    should agree. Where they differ beyond noise, the machine's speed changed between runs (a busy
    shared host, thermal limits, another tenant), and the final comparison mixes that with the
    flags' effect: say so, with the numbers (None when they agree or there is nothing to check)."""
    if earlier is None or earlier is final or not earlier.ok:
        return None
    cmp = compare_measurements(earlier, final, threshold_pct)
    moved = [(s, r) for s, r in cmp.moved() if r.key != "prefix_hit_rate"]
    if not moved:
        return None
    shown = "; ".join((f"{s}: " if len(cmp.rows) > 1 else "") + show_row(r) for s, r in moved[:4])
    return (
        f"The same flags measured by the step that chose them ({earlier.sweep_dir.name}) and here differ beyond noise "
        f"({shown}): the machine's speed changed between runs, so this comparison with the baseline mixes that with "
        "the flags' effect; repeat on a quiet machine or with measure.repeats"
    )


def quality_vs_baseline(ctx: TuneContext, base: Measurement, final: Measurement) -> tuple[dict[str, Any], str] | None:
    """The final flags' greedy outputs judged against the baseline's, as `harness compare` of the
    two cells prints them: each step gated its own winner against the incumbent of the moment,
    and small changes can add up along the chain. None without a quality block or outputs."""
    v = quality_verdict(ctx, base, final)  # None without a quality block
    if v is None:
        return None
    why = f": {'; '.join(v.reasons)}" if v.failed and v.reasons else ""
    return quality_row(v) or {}, f"Quality vs the baseline: {v.status.upper()} ({v.short()}){why}"


class Final:
    name = "final"
    summary = "the full benchmark on the chosen flags, afresh, compared with the baseline: every change beyond noise, good and bad"

    def run(self, ctx: TuneContext) -> StepResult:
        ms = ctx.measure(self.name, [ctx.current], fresh=True)
        if ms is None:
            return ctx.budget_skip(self.name)
        (m,) = ms
        earlier = ctx.measurer.cache.get(flags_key(ctx.current))  # the measurement the steps decided on
        if not m.ok:
            return StepResult(
                self.name,
                "failed",
                f"the chosen flags did not give a complete run: {m.failure_kind()}: {m.failure}",
                dict(ctx.current),
                [tried_row(m)],
            )
        base = ctx.baseline
        if base is None:
            return StepResult(self.name, "kept", "no baseline to compare with.", dict(ctx.current), [tried_row(m)])
        vs = vs_baseline(base, m, ctx.threshold_pct)
        ctx.final = m
        ctx.vs_baseline = vs
        same = m.flags == base.flags
        what = "the baseline flags (nothing changed), measured again," if same else "the chosen flags"
        head = {
            "better": f"{what} beat the baseline beyond noise",
            "worse": f"{what} are worse than the baseline beyond noise",
            "mixed": f"{what} differ from the baseline beyond noise both ways",
            "same": f"{what} are within noise of the baseline on every metric compared",
        }[vs["verdict"]]
        body = story(vs)
        moved = drift(earlier, m, ctx.threshold_pct)
        if moved:
            vs["drift"] = moved
        reason = f"{head}. {body}" if body else head
        if moved:
            reason = reason.rstrip(".") + f". {moved}"
        said = quality_vs_baseline(ctx, base, m) if not same else None
        if said is not None:
            vs["quality"], line = said
            reason = reason.rstrip(".") + f". {line}"
        verdict = "kept" if same else "changed"
        return StepResult(
            self.name, verdict, reason.rstrip(".") + ".", dict(ctx.current), [tried_row(m)], {"vs_baseline": vs}
        )


STEPS.add(Final.name, Final())
