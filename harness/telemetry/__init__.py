"""Engine telemetry: scrape the engine (or query Prometheus) beside a run, over its measured window.

Modules: exposition (parse pages), window (deltas, quantiles; each engine kind's /metrics profile
is in harness/engines),
direct / promql (sources), nvml (GPU memory), block (the summary's `engine` block),
session (the orchestrator's entry point), reconcile (client vs engine warnings).
"""

from harness.telemetry.reconcile import reconcile
from harness.telemetry.session import TelemetrySession

__all__ = ["TelemetrySession", "reconcile"]
