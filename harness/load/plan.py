"""The load plan: what the orchestrator hands to a load process (a JSON file).

Importing this module does not import Locust or gevent, so the orchestrator can write plans.
The file never holds a credential header's value (harness.scenario.secrets): `write` masks
them, `read` takes the real values from the load process's environment, and a plan in memory
(the web UI's, a Locust master's messages to its workers) keeps them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from harness.scenario.models import Scenario
from harness.scenario.secrets import masked_scenario, restored_scenario, secrets_env


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
    #: the stream reader (harness.client.http_stream.choose_reader): auto = native where it was
    #: built on the host the load process runs on, unless $HARNESS_READER says otherwise
    reader: str = "auto"
    stop_grace_s: float = 30.0  # how long in-flight requests may finish after the window ends
    progress_interval_s: float = 1.0
    gc_tune: bool = True
    #: a Locust worker ships its live Prometheus counts to the master in every delta (the master
    #: exports them: harness.metrics.exporter.MasterMetrics); set when the master serves /metrics
    live_metrics: bool = False
    #: a Locust LoadTestShape drives the users: the first stage's label (later ones arrive as Stage
    #: messages); requests carry ("stage", label) so the summary has one block per stage
    stage: str | None = None

    def write(self, path: Path) -> None:
        """The plan as a file, credential headers masked."""
        data = self.model_dump(mode="json")
        data["scenario"] = masked_scenario(data["scenario"])
        Path(path).write_text(LoadPlan.model_validate(data).model_dump_json(indent=2))

    @classmethod
    def read(cls, path: Path, env: Mapping[str, str] | None = None) -> LoadPlan:
        """A plan file, with the masked headers' values from `env` (default: this process's)."""
        plan = cls.model_validate_json(Path(path).read_text())
        plan.scenario = restored_scenario(plan.scenario, os.environ if env is None else env)
        return plan

    def users(self) -> tuple[int, float]:
        """This load process's Locust users and spawn rate: its share (worker of workers) of the
        scenario's load (harness.scenario.models.Load defines both)."""
        load = Scenario.model_validate(self.scenario).load
        users = load.users_of(self.worker, self.workers)
        return users, load.spawn_rate(users)

    def secrets_env(self) -> dict[str, str]:
        """What a load process started on this plan's file needs in its environment."""
        return secrets_env(self.scenario)
