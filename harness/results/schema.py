"""The run directory contract: what `summary.json` holds, typed, and the files beside it.

The models live in harness.results.models (summary.json: harness.results.models.summary); this
module keeps the names users' scripts import. Other parts (report, compare, sweep, the GitHub
workflow) and users' scripts read these files, so fields are only ever added; `schema_version`
changes when a meaning changes. Read a run with harness.results.read.load_run.

Run directory layout (see harness.results.layout):
  scenario.yaml        resolved scenario (overrides applied, seed fixed)
  summary.json         RunSummary below
  histograms.json      lossless histograms per class and `_all`: {"<class>": {"hist": {"<metric>":
                       {"hdr": "<base64 HDR V2>", "sum", "min", "max", "clamped_low",
                       "clamped_high", "range"}}, "counts": {...}, "errors": {...}}}
                       (latencies in integer ns; tokens_per_chunk in tokens)
  requests.jsonl       one line per request, appended as each finishes
  engine_metrics.jsonl telemetry time series, one scrape per line
  progress.jsonl       the load process's periodic progress lines
  timeslices.json      per-interval figures (harness.diagnose.timeslices)
  interference.json    ITL spikes and long-prefill intervals, for the report's time plot
  load.log, sim.log    logs of the load process and simulated engine
  report.md/.html      written by `harness report`
"""

from __future__ import annotations

from harness.metrics.table import LATENCY_NAMES
from harness.results.models.diagnosis import Finding
from harness.results.models.summary import (
    SCHEMA_VERSION,
    ClassBlock,
    Dist,
    GroupBlock,
    RequestsBlock,
    RunSummary,
    Spread,
    TokensBlock,
)

#: latency blocks in `latency_ms`, in the metric table's storage order (harness.metrics.table)
LATENCY_METRICS: tuple[str, ...] = LATENCY_NAMES

__all__ = [
    "LATENCY_METRICS",
    "SCHEMA_VERSION",
    "ClassBlock",
    "Dist",
    "Finding",
    "GroupBlock",
    "RequestsBlock",
    "RunSummary",
    "Spread",
    "TokensBlock",
]
