"""Decide whether a candidate beats the current best, beyond noise.

The objective is goodput under the SLOs at the expected load (req/s of requests that met every
SLO; plain req/s when no scenario sets one). A candidate is better only when, on some scenario of
the workload, its goodput is higher by more than the threshold AND the difference is beyond the
noise as `harness compare` judges it (bootstrap over time slices of the run, and every candidate
repeat above every baseline repeat when there are repeats), and it is not worse that way on any
scenario. Anything else is a tie, broken by the capacity under the SLOs (highest load level held)
when capacity levels were measured; otherwise the current best is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.report.compare import Options, compare_runs
from harness.report.data import load_run
from harness.report.metrics import METRICS
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
            if ch is not None:
                bit += f" ({ch:+.1f}%"
                if iv:
                    bit += f", 95% interval [{iv[0]:+.1f}, {iv[1]:+.1f}]%"
                bit += ")"
            parts.append(bit)
        return "; ".join(parts)


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
        out[scenario] = {
            "metric": key, "baseline": row.baseline, "candidate": row.candidate, "change_pct": row.change,
            "interval": list(row.interval) if row.interval else None, "tests": row.tests, "compare_verdict": row.verdict,
            "verdict": verdict,
        }
    verdicts = [r["verdict"] for r in out.values()]
    if "worse" in verdicts:
        return Judgement("worse", "goodput", out)
    if "better" in verdicts:
        return Judgement("better", "goodput", out)
    # a tie on goodput: the capacity under the SLOs, when levels beyond the expected load ran
    caps_i = {s: incumbent.capacity_value(s) for s in incumbent.scenarios}
    caps_c = {s: candidate.capacity_value(s) for s in incumbent.scenarios}
    if any(len({e.get("load_level") for e in m.complete}) > 1 for m in (incumbent, candidate)):
        if all(caps_c[s] >= caps_i[s] for s in caps_i) and any(caps_c[s] > caps_i[s] for s in caps_i):
            return Judgement("better", "capacity", out)
        if any(caps_c[s] < caps_i[s] for s in caps_i):
            return Judgement("worse", "capacity", out)
    return Judgement("tie", "", out)
