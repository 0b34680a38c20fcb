"""Decide whether a candidate beats the current best, beyond noise.

The objective is goodput under the SLOs at the expected load (req/s of requests that met every
SLO; plain req/s when no scenario sets one). A candidate is better only when, on some scenario of
the workload, its goodput is higher by more than the threshold AND the difference is beyond the
noise as `harness compare` judges it (bootstrap over time slices of the run, and every candidate
repeat above every baseline repeat when there are repeats), and it is not worse that way on any
scenario. When no request of the current best met the SLOs on a scenario, a relative change has
no base; there the candidate is better when its share of requests within the SLOs is higher
beyond noise (one-sided Fisher exact test). In a closed loop whose time slices are shorter than
a request (waves of completions), a tie is decided by the per-request goodput of Little's law
(harness/tune/closed_loop.py) when it agrees with the measured change. Anything else is a tie, broken by the capacity under the SLOs (highest load level held)
when capacity levels were measured; otherwise the current best is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from harness.report.compare import Options, compare_runs
from harness.report.data import load_run
from harness.report.metrics import METRICS
from harness.tune.closed_loop import per_request_goodput
from harness.tune.measure import Measurement


@dataclass
class Judgement:
    verdict: str  # better | worse | tie
    by: str  # "goodput" | "capacity" | ""
    per_scenario: dict[str, dict[str, Any]] = field(default_factory=dict)

    def text(self) -> str:
        parts = []
        for s, r in self.per_scenario.items():
            ch = r.get("change_pct")
            iv = r.get("interval")
            bit = f"{s}: {r['verdict']}"
            zero = next((t for t in r.get("tests") or () if "Fisher" in t), None)
            loop = r.get("closed_loop")
            if zero:
                bit += f" ({zero})"
            elif loop:
                bit += f" ({ch:+.1f}% measured; time-slice interval too wide; {loop})"
            elif ch is not None:
                bit += f" ({ch:+.1f}%"
                if iv:
                    bit += f", 95% interval [{iv[0]:+.1f}, {iv[1]:+.1f}]%"
                bit += ")"
            parts.append(bit)
        return "; ".join(parts)


def fisher_greater(k_b: int, n_b: int, k_c: int, n_c: int) -> float:
    """One-sided Fisher exact p-value that the candidate's share of good requests (k_c of n_c)
    exceeds the baseline's (k_b of n_b): the chance of k_c or more good ones among the candidate's
    n_c when the k_b + k_c good requests fall at random between the two sides."""
    total, good = n_b + n_c, k_b + k_c
    denom = math.comb(total, n_c)
    return sum(math.comb(good, k) * math.comb(total - good, n_c - k) for k in range(k_c, min(good, n_c) + 1)) / denom


def _good_count(m: Measurement, scenario: str) -> tuple[int, int]:
    """(requests within the SLOs, completed requests) over the repeats at the expected load."""
    good = done = 0
    for e in m.at_expected(scenario):
        n = e.metrics.completed or 0
        done += n
        good += int(round((e.metrics.goodput_fraction or 0.0) * n))
    return good, done


def from_zero(incumbent: Measurement, candidate: Measurement, scenario: str, alpha: float) -> dict[str, Any] | None:
    """When no request of the incumbent met the SLOs, a relative change has no base and the
    compare's bootstrap gives no interval; the candidate is better when its share of requests
    within the SLOs is higher beyond noise (one-sided Fisher exact test at `alpha`). None when
    the incumbent had good requests (the compare decides) or nothing completed."""
    k_b, n_b = _good_count(incumbent, scenario)
    k_c, n_c = _good_count(candidate, scenario)
    if k_b != 0 or n_b == 0 or n_c == 0 or k_c == 0:
        return None
    p = fisher_greater(k_b, n_b, k_c, n_c)
    return {"verdict": "better" if p < alpha else "tie",
            "test": f"0 of {n_b} requests within the SLOs vs {k_c} of {n_c} (one-sided Fisher exact p={p:.2g})"}


def closed_loop_verdict(base: list, cand: list, change: float, threshold_pct: float, confidence: float) -> tuple[str, str | None]:
    """A goodput tie whose time-slice interval is too wide for the window (closed loop, slices
    shorter than a request): decided by the per-request goodput (harness/tune/closed_loop.py)
    when both it and the measured change move beyond the threshold the same way and its
    interval excludes zero. ('tie', None) when that test does not apply."""
    loop = per_request_goodput(base, cand, confidence)
    if loop is None:
        return "tie", None
    lo, hi = loop["interval"]
    lch = loop["change_pct"]
    if change > threshold_pct and lch > threshold_pct and lo > 0:
        return "better", loop["test"]
    if change < -threshold_pct and lch < -threshold_pct and hi < 0:
        return "worse", loop["test"]
    return "tie", loop["test"]


def _goodput_metric(m: Measurement) -> str:
    return "goodput_rps" if m.metric("goodput_req_per_s") is not None else "rps"


def judge(incumbent: Measurement, candidate: Measurement, threshold_pct: float = 5.0) -> Judgement:
    if not candidate.ok:
        return Judgement("worse", "failed", {})
    if not incumbent.ok:
        return Judgement("better", "failed", {})
    key = _goodput_metric(incumbent)
    metric = METRICS[key]
    opts = Options(threshold_pct=threshold_pct)
    out: dict[str, dict[str, Any]] = {}
    for scenario in incumbent.scenarios:
        base = [load_run(p) for p in incumbent.run_dirs(scenario)]
        cand = [load_run(p) for p in candidate.run_dirs(scenario)]
        if not base or not cand:
            continue
        (row,) = compare_runs(base, cand, [metric], opts)
        verdict = {"improved": "better", "REGRESSION": "worse"}.get(row.verdict, "tie")
        tests = list(row.tests)
        zero = from_zero(incumbent, candidate, scenario, 1 - opts.confidence) if key == "goodput_rps" and not row.baseline else None
        if zero is not None:
            verdict = zero["verdict"]
            tests.append(zero["test"])
        loop_text = None
        if zero is None and verdict == "tie" and row.change is not None and abs(row.change) > threshold_pct:
            verdict, loop_text = closed_loop_verdict(base, cand, row.change, threshold_pct, opts.confidence)
            if loop_text:
                tests.append(loop_text)
        out[scenario] = {
            "metric": key, "baseline": row.baseline, "candidate": row.candidate, "change_pct": row.change,
            "interval": list(row.interval) if row.interval else None, "tests": tests, "compare_verdict": row.verdict,
            "verdict": verdict, **({"closed_loop": loop_text} if loop_text else {}),
        }
    verdicts = [r["verdict"] for r in out.values()]
    if "worse" in verdicts:
        return Judgement("worse", "goodput", out)
    if "better" in verdicts:
        return Judgement("better", "goodput", out)
    # a tie on goodput: the capacity under the SLOs, when levels beyond the expected load ran
    caps_i = {s: incumbent.capacity_value(s) for s in incumbent.scenarios}
    caps_c = {s: candidate.capacity_value(s) for s in incumbent.scenarios}
    if any(len({e.load_level for e in m.complete}) > 1 for m in (incumbent, candidate)):
        if all(caps_c[s] >= caps_i[s] for s in caps_i) and any(caps_c[s] > caps_i[s] for s in caps_i):
            return Judgement("better", "capacity", out)
        if any(caps_c[s] < caps_i[s] for s in caps_i):
            return Judgement("worse", "capacity", out)
    return Judgement("tie", "", out)
