"""Engine telemetry of a fleet: one scraping session per replica, driven as one.

The first endpoint's session is the run's `engine` block (and its engine_metrics.jsonl) as for a
single server; every other replica gets its own session writing `replicas/r<i>/engine_metrics.jsonl`.
The window marks reach all of them at once, so each replica's block covers exactly the measured
window: its queue depth (waiting requests) over time is the autoscaling signal (guide 001, 4.3),
its prefix hit rate the per-replica cache benefit of the routing policy.
"""

from __future__ import annotations

import pathlib
from typing import Any


class FleetTelemetry:
    def __init__(self, sessions: list[Any], endpoints: list[str]) -> None:
        self.sessions = sessions
        self.endpoints = endpoints
        self.primary = sessions[0]
        self.live = self.primary.live
        self.replica_blocks: list[dict[str, Any]] = []

    def mark_window_start(self, *, idle_before: bool = False) -> None:
        for s in self.sessions:
            s.mark_window_start(idle_before=idle_before)

    def mark_window_end(self) -> None:
        for s in self.sessions:
            s.mark_window_end()

    def stop(self) -> dict[str, Any]:
        blocks = [s.stop() for s in self.sessions]
        self.replica_blocks = blocks
        return blocks[0]

    def per_replica(self) -> list[dict[str, Any]]:
        """Each replica's headline figures over the window (the full blocks stay in the sessions' files)."""
        out = []
        for url, b in zip(self.endpoints, self.replica_blocks, strict=False):  # no blocks before stop()
            pc = b.get("prefix_cache") or {}
            out.append(
                {
                    "endpoint": url,
                    "waiting": b.get("waiting"),
                    "running": b.get("running"),
                    "kv_usage": b.get("kv_usage"),
                    "prefix_hit_rate": pc.get("hit_rate"),
                    "preemptions": (b.get("preemptions") or {}).get("count"),
                    "gpu_utilization": (b.get("gpu_memory") or {}).get("utilization"),
                    "missing_reason": (b.get("telemetry") or {}).get("missing_reason"),
                }
            )
        return out


def start_fleet_telemetry(make: Any, endpoints: list[str], root: pathlib.Path) -> FleetTelemetry | None:
    """`make(url, out_dir)` starts one session; None when the primary one is not started."""
    primary = make(endpoints[0], root)
    if primary is None:
        return None
    sessions = [primary]
    for i, url in enumerate(endpoints[1:], 1):
        d = root / "replicas" / f"r{i}"
        d.mkdir(parents=True, exist_ok=True)
        s = make(url, d)
        if s is not None:
            sessions.append(s)
    return FleetTelemetry(sessions, endpoints[: len(sessions)])
