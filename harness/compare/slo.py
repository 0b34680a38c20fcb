"""Whether a measured request met its SLOs, read back from a run directory.

The predicate itself is `harness.metrics.record.within_slo`, the one the recorder applies while
the run is measured (summary.json's goodput), so goodput recomputed here from requests.jsonl for
a noise test counts exactly the requests the run counted. This module adds what a finished run
needs: each class's limits from the resolved scenario.yaml (the scenario's `slo`, overridden per
class) and the mapping from a requests.jsonl line to the predicate's inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.metrics.record import SLO_FIELDS, within_slo

SloOf = Callable[[str], dict[str, Any]]


def slo_lookup(scenario: dict[str, Any] | None) -> SloOf | None:
    """class name -> its SLO limits (ms), from a resolved scenario.yaml; None when the scenario
    is unknown (scenario.yaml missing), so no caller mistakes 'unknown' for 'no limits'."""
    if not isinstance(scenario, dict):
        return None
    slo = scenario.get("slo")
    base: dict[str, Any] = slo if isinstance(slo, dict) else {}
    per: dict[str, dict[str, Any]] = {}
    for c in (scenario.get("workload") or {}).get("classes") or []:
        if isinstance(c, dict) and c.get("name"):
            per[str(c["name"])] = {**base, **{k: v for k, v in (c.get("slo") or {}).items() if v is not None}}
    return lambda name: per.get(name, base)


def has_slo(scenario: dict[str, Any] | None) -> bool:
    """Whether any SLO limit is set (else goodput is plain throughput: every completed request counts)."""
    of = slo_lookup(scenario)
    if of is None:
        return False
    names = [
        str(c.get("name")) for c in ((scenario or {}).get("workload") or {}).get("classes") or [] if isinstance(c, dict)
    ]
    return any(v is not None for n in [*names, ""] for v in of(n).values())


def meets_slo(request: dict[str, Any], slo: dict[str, Any]) -> bool:
    """A requests.jsonl line against its class's limits (ms)."""
    return within_slo(not request.get("error"), {key: request.get(key) for key in SLO_FIELDS.values()}, slo)
