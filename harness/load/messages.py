"""The typed messages between the Locust master (Collector) and its workers (WorkerAgent).

Locust carries plain dicts (msgpack); each message here is a dataclass with its message type,
`wire()` for sending and `of(data)` for receiving, so both sides name the same fields and a
missing or unknown field fails loudly at the receiver instead of reading as None.

    master -> worker   Plan    {run, plan}                 the LoadPlan with this worker's share
    master -> worker   Stop    {run}                       stop handing out work, drain, report
    master -> worker   Stage   {run, stage, users}         a LoadTestShape stage began: label the
                                                           requests sent from now on with it
    worker -> master   Delta   {run, worker, t, progress, events, metrics, requests, live}
                                                           every interval: histograms recorded since
                                                           the last delta, progress, window events,
                                                           the finished requests' jsonl lines, and
                                                           (plan.live_metrics) the live Prometheus
                                                           counts since the last delta
    worker -> master   Ready   {run}                       the worker's handlers are registered: only
                                                           now may the master hand out work (a Plan
                                                           that arrives first is dropped by Locust
                                                           as an unknown message type)
    worker -> master   Final   {run, worker, result, reason}
                                                           the controller's complete result
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

M = TypeVar("M", bound="Message")


@dataclass
class Message:
    TYPE: ClassVar[str]
    run: str

    def wire(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # shallow: histograms are large

    @classmethod
    def of(cls: type[M], data: dict[str, Any]) -> M:
        return cls(**data)


@dataclass
class Plan(Message):
    TYPE: ClassVar[str] = "harness_plan"
    plan: dict[str, Any] = field(default_factory=dict)  # LoadPlan, dumped


@dataclass
class Stop(Message):
    TYPE: ClassVar[str] = "harness_stop"


@dataclass
class Stage(Message):
    TYPE: ClassVar[str] = "harness_stage"
    stage: str = ""
    users: int = 0


@dataclass
class Delta(Message):
    TYPE: ClassVar[str] = "harness_delta"
    worker: int = 0
    t: float = 0.0
    progress: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)  # MetricSet.to_dict(with_all=False)
    requests: str = ""  # requests.jsonl lines
    live: dict[str, Any] = field(default_factory=dict)  # harness.metrics.exporter.LiveCounts.take(), or {}


@dataclass
class Ready(Message):
    TYPE: ClassVar[str] = "harness_ready"


@dataclass
class Final(Message):
    TYPE: ClassVar[str] = "harness_final"
    worker: int = 0
    result: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
