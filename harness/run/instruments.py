"""What watches the run besides the load: engine telemetry, the engine log, the host stall meter.

Started before the load, told when the measured window opens and when the last in-flight request
has drained (telemetry's baseline and end, the engine log's byte range for harness.diagnose),
stopped before the summary. `stall` is a StallMeter (a thread, `harness run`) or a
StallMeterProcess (the web UI, whose process is a gevent loop); both give `summary(start, end)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.diagnose import LogWindow
from harness.run.prepare import Prepared
from harness.workload.generator import expected_prefix_hit_rate


class Instruments:
    def __init__(self, prep: Prepared, stall: Any, engine_log: Path | None = None) -> None:
        self.telemetry: Any = None
        self.stall = stall
        self.log = LogWindow(engine_log)  # the byte range of the engine's log written during the window
        self._prep = prep

    def start(self) -> Instruments:
        self.telemetry = start_telemetry(self._prep)
        self.stall.start()
        return self

    def window_start(self) -> None:
        self.log.mark_start()
        if self.telemetry is not None:
            warmup = self._prep.scenario.warmup
            # no warmup: the run sent nothing before the window, so the engine's counters at the last
            # scrape before it are the window's starting values (TelemetrySession.mark_window_start)
            self.telemetry.mark_window_start(idle_before=warmup.duration_s <= 0 and warmup.requests <= 0)

    def window_end(self) -> None:
        self.log.mark_end()
        if self.telemetry is not None:
            self.telemetry.mark_window_end()

    @property
    def live(self) -> Any:
        """The telemetry's live view (a callable for the progress line), or None."""
        return self.telemetry.live if self.telemetry is not None else None

    def stop_telemetry(self) -> dict[str, Any]:
        """The engine block of summary.json ({} without telemetry)."""
        return self.telemetry.stop() if self.telemetry is not None else {}

    def per_replica(self) -> list[dict[str, Any]] | None:
        """A fleet's replicas over the window (queue depth, prefix hits, ...); None for one server."""
        return self.telemetry.per_replica() if hasattr(self.telemetry, "per_replica") else None


def start_telemetry(prep: Prepared) -> Any:
    """A started TelemetrySession scraping the target's /metrics, or None when the scenario says no.

    A fleet (target.endpoints) gets one session per replica over the same window
    (harness.telemetry.fleet): the first is the run's engine block, the others per replica."""
    scenario = prep.scenario
    if not scenario.telemetry.enabled:
        return None
    from harness.telemetry.session import TelemetrySession

    def start(url: str, out_dir: Path) -> Any:
        session = TelemetrySession(
            target_url=url,
            config=scenario.telemetry,
            out_dir=out_dir,
            expected_prefix_hit_rate=expected_prefix_hit_rate(scenario),
            engine_kind=prep.engine_kind,
        )
        session.start()
        return session

    fleet = scenario.target.endpoints
    if fleet and len(fleet) > 1 and not scenario.telemetry.metrics_url and not scenario.telemetry.prometheus:
        from harness.telemetry.fleet import start_fleet_telemetry

        return start_fleet_telemetry(
            start, [prep.target_url, *(u for u in fleet if u != prep.target_url)], prep.run_dir.root
        )
    return start(prep.target_url, prep.run_dir.root)
