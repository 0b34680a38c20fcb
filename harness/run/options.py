"""What a caller asks of one run (`harness run`, sweeps, capacity search, each test of the web UI):
the options of the one run driver (harness.run.driver.RunDriver)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.run.follow import WatchedEngine


@dataclass
class RunOptions:
    out_dir: Path
    target_url: str | None = None  # None: start the built-in simulated engine
    model: str | None = None
    sim_args: list[str] = field(default_factory=list)
    engine_kind: str | None = None  # hint for telemetry (vllm, sglang, sim, ...)
    show_progress: bool = True
    write_report: bool = True
    processes: int = 1
    scenario_path: str | None = None
    #: where the scenario's relative paths start (None: the directory of scenario_path)
    scenario_dir: Path | None = None
    #: `--percentiles`: the console table's columns, read from the HDR histograms (None: the summary's)
    percentiles: tuple[float, ...] | None = None
    #: receives each progress line instead of the terminal (a sweep shows it inside its own)
    progress_sink: Callable[[str], None] | None = None
    labels: dict[str, str] = field(default_factory=dict)  # e.g. sweep config id, for exporters
    kernel_stamps: bool = True
    reader: str = "auto"  # auto | native | python (harness.client.http_stream.choose_reader)
    stop_grace_s: float = 30.0
    distributed: int = 0  # > 0: a Locust master and this many worker processes (harness.load.distributed)
    #: the `distributed` workers run on other machines (`harness worker --master-host`): the master
    #: listens on master_bind_host:master_port and starts none
    remote_workers: bool = False
    master_bind_host: str = "0.0.0.0"
    master_port: int = 5557
    metrics_port: int | None = None  # serve live harness_ metrics (Prometheus) on this port while running
    metrics_host: str = "127.0.0.1"
    metrics_server: Any = (
        None  # a started exporter_server.MetricsServer shared across runs (sweeps); wins over the port
    )
    #: reset the target's prefix cache before the run (or salt the prompts where it cannot be
    #: reset); `harness run` turns it on, sweeps reset between cells themselves (harness.run.prefix_cache)
    reset_prefix_cache: bool = False
    #: why the prefix cache is left alone, when the user asked for that (summary.json's isolation reason)
    reset_off_reason: str | None = None
    #: check the scenario's quality prompts up front and run its quality pass after the window
    #: (the web UI does neither: its tests are interactive)
    quality: bool = True
    #: without a tokenizer, size the prompts in the target's tokens (its POST /tokenize)
    calibrate: bool = True
    #: a run where most requests failed reads `failed` (the web UI shows the figures and leaves it complete)
    judge: bool = True
    #: the host stall meter: "thread" beside the orchestrator, or "process" where threads are
    #: greenlets (the web UI's gevent loop would measure itself)
    stall_meter: str = "thread"
    #: called with the latest progress line of every load process; a returned reason stops the run
    #: early (harness.capacity.saturation: an over-saturated trial), recorded in summary.load.stopped_early
    watch: Callable[[list[dict[str, Any]]], str | None] | None = None
    #: the engine's log (a sweep's engine log, `--engine-log FILE`); the embedded simulator's own
    #: sim.log when None. Read over the measured window by harness.diagnose.enginelog
    engine_log: Path | None = None
    #: width of the per-interval figures (timeslices.json, the steady-state check), `--slice-s`
    slice_s: float = 10.0
    #: the engine process another driver started (a sweep's; harness.run.follow.WatchedEngine): its
    #: exit mid-run stops the load and fails the run, as the embedded simulator's does, instead of
    #: sending the rest of the requests to a dead port
    engine: WatchedEngine | None = None

    @property
    def mode(self) -> str:
        """The run mode (harness.run.modes): how the load processes are started."""
        return "distributed" if self.distributed else "processes"
