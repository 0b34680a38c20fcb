"""Pass/fail thresholds on one run's results, k6-style: `--fail-on "error_rate>1%"`.

Why: CI must be able to gate on a single run (k6 `thresholds`, exit 99 when one fails). Each
threshold names the condition that FAILS the run: `error_rate>1%`, `slo_attainment<95%`,
`ttft_p99>500ms`, `output_tps<100`, and `invalid`: the run carries validity warnings (a
saturated client, host stalls, a simulated engine behind its schedule, ...), which otherwise
only print. They come from `--fail-on` (repeatable) and from the scenario's `thresholds:` list,
and are checked against summary.json after the run.
No imports from the rest of harness: the scenario model validates them, the CLI evaluates them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: exit status of `harness run` when a threshold failed (k6 uses the same)
THRESHOLD_EXIT = 99

_LATENCY = ("ttft", "tpot", "itl_chunk", "itl_token", "itl", "e2e", "send_lag")
_STATS = ("p50", "p90", "p99", "p999", "mean", "max", "min")
#: rates (value in %, or a bare fraction); throughputs (bare numbers per second)
_RATES = ("error_rate", "slo_attainment")
_THROUGHPUTS = ("rps", "output_tps", "goodput_rps")
_EXPR = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*(%|ms|s)?\s*$", re.IGNORECASE)


#: the condition that fails a run with validity warnings (summary.json validity.ok false)
INVALID = "invalid"


def known_metrics() -> list[str]:
    return [*_RATES, *_THROUGHPUTS, *(f"{m}_{s}" for m in _LATENCY for s in _STATS)]


@dataclass(frozen=True)
class Threshold:
    text: str
    metric: str
    op: str
    value: float  # rates as fractions, latencies in ms, throughputs per second

    def failed(self, actual: float) -> bool:
        return {"<": actual < self.value, "<=": actual <= self.value, ">": actual > self.value,
                ">=": actual >= self.value}[self.op]


def parse(text: str) -> Threshold:
    """`metric op value[unit]`, or `invalid`; ValueError naming what is wrong and what is allowed."""
    if text.strip().lower() == INVALID:
        return Threshold(INVALID, INVALID, "", 0.0)
    m = _EXPR.match(text)
    if not m:
        raise ValueError(f"{text!r}: expected METRIC<VALUE or METRIC>VALUE, e.g. error_rate>1% or ttft_p99>500ms, "
                         "or invalid (fail on validity warnings)")
    metric, op, number, unit = m.group(1).lower(), m.group(2), float(m.group(3)), (m.group(4) or "").lower()
    if metric not in known_metrics():
        raise ValueError(f"{text!r}: unknown metric {metric!r}; use error_rate, slo_attainment, rps, output_tps, "
                         f"goodput_rps or <ttft|tpot|itl|e2e>_<{'|'.join(_STATS)}>")
    if metric in _RATES:
        if unit not in ("", "%"):
            raise ValueError(f"{text!r}: {metric} is a rate; give a percentage (1%) or a fraction (0.01)")
        value = number / 100 if unit == "%" else number
        if not 0 <= value <= 1:
            raise ValueError(f"{text!r}: {metric} is between 0% and 100%")
    elif metric in _THROUGHPUTS:
        if unit:
            raise ValueError(f"{text!r}: {metric} is per second; give a bare number")
        value = number
    else:
        if unit == "%":
            raise ValueError(f"{text!r}: {metric} is a latency; give ms or s (500ms, 0.5s)")
        value = number * 1000 if unit == "s" else number
    return Threshold(text.strip(), metric, op, value)


def actual(summary: dict[str, Any], metric: str) -> float | None:
    """The run's value of `metric` from a summary.json dict (None when the run has none)."""
    requests = summary.get("requests", {})
    if metric == "error_rate":
        done, failed = requests.get("completed", 0), requests.get("failed", 0)
        return failed / (done + failed) if done + failed else None
    if metric == "slo_attainment":
        return (summary.get("goodput", {}).get("overall") or {}).get("fraction")
    if metric == "rps":
        return requests.get("rps")
    if metric == "output_tps":
        return summary.get("tokens", {}).get("output_per_s")
    if metric == "goodput_rps":
        return (summary.get("goodput", {}).get("overall") or {}).get("rps")
    name, _, stat = metric.rpartition("_")
    name = "itl_chunk" if name == "itl" else name
    return (summary.get("latency_ms", {}).get(name) or {}).get(stat)


def _show(metric: str, value: float) -> str:
    if metric in _RATES:
        return f"{100 * value:.2f}%"
    if metric in _THROUGHPUTS:
        return f"{value:.2f}/s"
    return f"{value:.1f} ms"


def evaluate(thresholds: list[Threshold], summary: dict[str, Any]) -> list[str]:
    """One line per failed threshold (a metric the run does not have fails too: nothing to judge)."""
    out = []
    for t in thresholds:
        if t.metric == INVALID:
            validity = summary.get("validity") or {}
            if not validity.get("ok", True):
                warnings = [str(w) for w in validity.get("warnings") or []] or ["validity.ok is false"]
                out.append(f"threshold invalid failed: the run has {len(warnings)} validity warning(s):")
                out.extend(f"  - {w}" for w in warnings)
            continue
        value = actual(summary, t.metric)
        if value is None:
            out.append(f"threshold {t.text} failed: the run has no {t.metric} (no request completed, or no slo set)")
        elif t.failed(value):
            out.append(f"threshold {t.text} failed: {t.metric} = {_show(t.metric, value)}")
    return out
