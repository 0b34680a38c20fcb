"""What a comparison reads of a run: the seam to the run-directory reader above this package.

harness.report.data.RunData (the reader that tolerates crashed runs) provides it; tests build
runs in memory. Only what the noise tests use is named here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from harness.results.hdr import Hist
from harness.results.schema import RunSummary


class RunLike(Protocol):
    path: Path
    summary: RunSummary
    requests: list[dict[str, Any]] | None
    scenario: dict[str, Any] | None  # the resolved scenario.yaml
    engine_metrics: list[dict[str, Any]] | None  # engine_metrics.jsonl: one scrape per line

    def measured_requests(self) -> list[dict[str, Any]]: ...

    def hist(self, metric: str, group: str = "_all") -> Hist | None: ...
