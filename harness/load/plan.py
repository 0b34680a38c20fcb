"""The load plan: what the orchestrator hands to a load process (a JSON file).

Importing this module does not import Locust or gevent, so the orchestrator can write plans.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class LoadPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scenario: dict[str, Any]  # the resolved scenario (Scenario.model_dump(mode="json"))
    scenario_dir: str = "."  # for relative tokenizer paths
    target_url: str
    model: str
    api_key_env: str | None = None
    continuous_usage: bool = False
    out_dir: str
    worker: int = 0  # this process's share of the request stream
    workers: int = 1
    kernel_stamps: bool = True
    stop_grace_s: float = 30.0  # how long in-flight requests may finish after the window ends
    progress_interval_s: float = 1.0
    gc_tune: bool = True
    #: a Locust worker ships its live Prometheus counts to the master in every delta (the master
    #: exports them: harness.metrics.exporter.MasterMetrics); set when the master serves /metrics
    live_metrics: bool = False
    #: a Locust LoadTestShape drives the users: the first stage's label (later ones arrive as Stage
    #: messages); requests carry ("stage", label) so the summary has one block per stage
    stage: str | None = None
