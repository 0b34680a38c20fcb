"""Comparison statistics: is a difference between two sets of runs real, and which way?

Everything that decides "better / worse / within noise" lives here, below the report, so that
`harness compare`, the regression gate, tune's decisions, capacity and sweep rankings all ask
the same questions the same way (a decision `harness compare` would contradict is a bug):

- metrics.py      the compared metrics: where each lives in summary.json, its unit, which way is better
- noise.py        per-metric noise tests (time-block / time-slice bootstrap, repeats) and
                  `compare_runs`, with Holm's family-wise control over the metrics compared
- stats.py        bootstrap draws, intervals, p-values, Holm, proportion and Fisher tests
- slo.py          the SLO predicate on requests.jsonl records (one predicate: harness.metrics.record)
- closed_loop.py  per-request (Little's law) goodput for closed-loop windows shorter than a request
- model.py        Options (threshold, confidence, draws) and Row (one metric's answer)
- runs.py         the RunLike seam: what a comparison reads of a run directory
"""

from harness.compare.metrics import METRICS, MetricDef, resolve
from harness.compare.model import Options, Row
from harness.compare.noise import compare_runs
from harness.compare.slo import meets_slo, slo_lookup

__all__ = ["METRICS", "MetricDef", "Options", "Row", "compare_runs", "meets_slo", "resolve", "slo_lookup"]
