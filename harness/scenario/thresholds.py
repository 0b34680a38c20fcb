"""Pass/fail thresholds on one run's results, k6-style: `--fail-on "error_rate>1%"`.

Why: CI must be able to gate on a single run (k6 `thresholds`, exit 99 when one fails). Each
threshold names the condition that FAILS the run: `error_rate>1%`, `slo_attainment<95%`,
`ttft_p99>500ms`, `output_tps<100`, and `invalid`: the run carries validity warnings (a
saturated client, host stalls, a simulated engine behind its schedule, ...), which otherwise
only print. They come from `--fail-on` (repeatable) and from the scenario's `thresholds:` list,
and are checked against summary.json after the run (harness.results.thresholds.evaluate).
No imports from the rest of harness: the scenario model validates them; judging needs the typed
summary, one layer up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
        return {
            "<": actual < self.value,
            "<=": actual <= self.value,
            ">": actual > self.value,
            ">=": actual >= self.value,
        }[self.op]


def parse(text: str) -> Threshold:
    """`metric op value[unit]`, or `invalid`; ValueError naming what is wrong and what is allowed."""
    if text.strip().lower() == INVALID:
        return Threshold(INVALID, INVALID, "", 0.0)
    m = _EXPR.match(text)
    if not m:
        raise ValueError(
            f"{text!r}: expected METRIC<VALUE or METRIC>VALUE, e.g. error_rate>1% or ttft_p99>500ms, "
            "or invalid (fail on validity warnings)"
        )
    metric, op, number, unit = m.group(1).lower(), m.group(2), float(m.group(3)), (m.group(4) or "").lower()
    if metric not in known_metrics():
        raise ValueError(
            f"{text!r}: unknown metric {metric!r}; use error_rate, slo_attainment, rps, output_tps, "
            f"goodput_rps or <ttft|tpot|itl|e2e>_<{'|'.join(_STATS)}>"
        )
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


def is_rate(metric: str) -> bool:
    return metric in _RATES


def is_throughput(metric: str) -> bool:
    return metric in _THROUGHPUTS
