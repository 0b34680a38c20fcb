"""The one target provider: the server a run measures, or the built-in simulator started for it.

Every front end that needs a server and may not be given one asks here: `harness run` (and the
sweeps' and capacity search's runs through it), the capacity search (one simulator for every
trial), `harness quality`, and the web UI (one simulator for the whole session). So the
simulator is started one way everywhere: with the scenario's LoRA adapters served by name
(`sim_lora_args`), the reporting flags (`reporting_args`), one process per replica of a
`target.replicas` fleet, its log beside the results, and stopped when the provider closes.

    with TargetProvider(sim_args, log_dir) as targets:
        target = targets.provide(scenario, url)      # url None: the scenario's, else a simulator
        scenario = target.applied(scenario)          # a fleet of simulators: their endpoints
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from harness.run.target import EmbeddedSim, sim_lora_args
from harness.scenario.models import Scenario


@dataclass
class Target:
    """The server of a run, as the run needs it."""

    url: str
    engine_kind: str | None = None  # a hint for telemetry and the findings; "sim" for the built-in one
    #: the built-in simulators serving it, when the provider started them (first: `url`), else []
    sims: list[EmbeddedSim] = field(default_factory=list)

    @property
    def sim(self) -> EmbeddedSim | None:
        """The simulator at `url`, when the provider started it: the run watches it for an early
        death and reads its log over the window."""
        return self.sims[0] if self.sims else None

    def applied(self, scenario: Scenario) -> Scenario:
        """`scenario` with this target's fleet: a `target.replicas` fleet of simulators becomes
        their endpoints, as if given in target.endpoints."""
        if len(self.sims) < 2:
            return scenario
        data = scenario.model_dump(mode="json")
        data["target"].update(replicas=1, endpoints=[s.url for s in self.sims])
        return Scenario.model_validate(data)


class TargetProvider:
    """Gives runs their target; starts the built-in simulator (once) when none is given.

    `sim_args`: the simulator's flags (`--sim-args`); `log_dir`: where its log goes (sim.log, and
    sim.rN.log for a fleet's other replicas); `engine_kind`: the kind of a given server, if known."""

    def __init__(
        self, sim_args: list[str] | None = None, log_dir: Path | None = None, engine_kind: str | None = None
    ) -> None:
        self.sim_args = list(sim_args or [])
        self.log_dir = Path(log_dir) if log_dir is not None else Path(".")
        self.engine_kind = engine_kind
        self.sims: list[EmbeddedSim] = []

    def provide(self, scenario: Scenario, url: str | None = None, *, replicas: int | None = None) -> Target:
        """The target: `url`, else the scenario's target.url (or its first endpoint), else the
        built-in simulator with `replicas` processes (default: the scenario's target.replicas),
        started on the first call and shared by later ones. A URL of a simulator this provider
        started is that simulator."""
        url = url or scenario.target.url or next(iter(scenario.target.endpoints or []), None)
        if url is not None:
            mine = [s for s in self.sims if s.url == url.rstrip("/")]
            return Target(mine[0].url, self.engine_kind or "sim", mine) if mine else Target(url, self.engine_kind)
        self.start(scenario, replicas if replicas is not None else scenario.target.replicas)
        return Target(self.sims[0].url, self.engine_kind or "sim", list(self.sims))

    def start(self, scenario: Scenario | None = None, replicas: int = 1) -> EmbeddedSim:
        """Start the simulator (and a fleet's other replicas) unless it runs; returns the first."""
        if not self.sims:
            args = sim_lora_args(scenario, self.sim_args) if scenario is not None else list(self.sim_args)
            self.log_dir.mkdir(parents=True, exist_ok=True)
            try:
                self.sims.append(EmbeddedSim(args, log_path=self.log_dir / "sim.log").start())
                for r in range(1, max(1, replicas)):
                    self.sims.append(EmbeddedSim(args, log_path=self.log_dir / f"sim.r{r}.log").start())
            except BaseException:  # one failed to start (or Ctrl-C): the ones running stop too
                self.close()
                raise
        return self.sims[0]

    @property
    def sim(self) -> EmbeddedSim | None:
        """The first simulator this provider started, if any."""
        return self.sims[0] if self.sims else None

    def close(self) -> None:
        """Stop every simulator this provider started."""
        sims, self.sims = self.sims, []
        for sim in sims:
            sim.stop()

    def __enter__(self) -> TargetProvider:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
