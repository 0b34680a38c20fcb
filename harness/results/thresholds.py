"""Thresholds (harness.scenario.thresholds: `--fail-on`, the scenario's `thresholds:`) judged on
one run's typed summary. Parsing stays in the scenario layer (the scenario model validates them);
judging needs the results contract, so it lives here, one layer up."""

from __future__ import annotations

from harness.results.models.summary import RunSummary
from harness.results.run_metrics import BY_NAME as RUN
from harness.scenario.thresholds import INVALID, Threshold, is_rate, is_throughput


def actual(summary: RunSummary, metric: str) -> float | None:
    """The run's value of `metric` (None when the run has none)."""
    if metric == "error_rate":
        rate = RUN["error_rate"].get(summary)
        return None if rate is None else rate / 100
    if metric == "slo_attainment":
        return RUN["goodput_fraction"].get(summary)
    if metric == "rps":
        return RUN["req_per_s"].get(summary)
    if metric == "output_tps":
        return RUN["output_tok_per_s"].get(summary)
    if metric == "goodput_rps":
        return RUN["goodput_req_per_s"].get(summary)
    name, _, stat = metric.rpartition("_")
    d = summary.latency_ms.get("itl_chunk" if name == "itl" else name)
    value = getattr(d, stat, None) if d is not None else None
    return float(value) if isinstance(value, (int, float)) else None


def _show(metric: str, value: float) -> str:
    if is_rate(metric):
        return f"{100 * value:.2f}%"
    if is_throughput(metric):
        return f"{value:.2f}/s"
    return f"{value:.1f} ms"


def evaluate(thresholds: list[Threshold], summary: RunSummary) -> list[str]:
    """One line per failed threshold (a metric the run does not have fails too: nothing to judge)."""
    out = []
    for t in thresholds:
        if t.metric == INVALID:
            if not summary.validity.ok:
                warnings = list(summary.validity.warnings) or ["validity.ok is false"]
                out.append(f"threshold invalid failed: the run has {len(warnings)} validity warning(s):")
                out.extend(f"  - {w}" for w in warnings)
            continue
        value = actual(summary, t.metric)
        if value is None:
            out.append(f"threshold {t.text} failed: the run has no {t.metric} (no request completed, or no slo set)")
        elif t.failed(value):
            out.append(f"threshold {t.text} failed: {t.metric} = {_show(t.metric, value)}")
    return out
