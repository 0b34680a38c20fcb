"""Loading a startup file and planning its starts: the sweep's config expansion and checks, one
engine start per (config, cold/warm, n), and the scenario cell per config when a scenario is named."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.errors import UserError
from harness.scenario.loader import read_yaml, validate
from harness.startup.models import StartupFile
from harness.sweep.checks import check_sweep
from harness.sweep.plan import Cell, Config, Plan, _check_command, build_plan, expand_configs


@dataclass(frozen=True)
class Start:
    config: Config
    kind: str  # "cold" | "warm"
    n: int  # 1-based within its kind

    @property
    def id(self) -> str:
        return f"{self.config.id}__{self.kind}{self.n}"


@dataclass
class StartupPlan:
    spec: StartupFile
    source: Path
    configs: list[Config]
    starts: list[Start]
    sweep_plan: Plan | None  # the scenario cells (one per config), None without a scenario

    def cell(self, config: Config) -> Cell | None:
        if self.sweep_plan is None:
            return None
        return next((c for c in self.sweep_plan.cells if c.config.id == config.id), None)

    def command(self, config: Config, port: int | str | None = None) -> list[str]:
        return self._commands.command(config, port)

    def __post_init__(self) -> None:
        # Plan.command renders argv from the engine spec; a scenario-less plan borrows it too
        self._commands = self.sweep_plan or Plan(
            sweep=self.spec.as_sweep(), source=self.source, configs=self.configs, scenarios=[], cells=[]
        )


def load_startup(path: str | Path) -> StartupFile:
    path = Path(path)
    return validate(StartupFile, read_yaml(path), str(path))


def build_startup_plan(path: str | Path) -> StartupPlan:
    source = Path(path).resolve()
    spec = load_startup(path)
    sweep = spec.as_sweep()
    if spec.scenario:
        sweep_plan = build_plan(path, sweep=sweep)
        configs = sweep_plan.configs
    else:
        check_sweep(sweep, source.parent, str(path))
        _check_command(sweep, str(path))
        configs = expand_configs(sweep)
        sweep_plan = None
    if not configs:
        raise UserError(f"{path}: vary makes no config; list flags under vary.flags or vary.configs")
    starts = [
        Start(c, kind, n)
        for c in configs
        for kind, count in (("cold", spec.cold), ("warm", spec.warm))
        for n in range(1, count + 1)
    ]
    return StartupPlan(spec=spec, source=source, configs=configs, starts=starts, sweep_plan=sweep_plan)


def render_plan(plan: StartupPlan) -> str:
    from harness.sweep.flags import shell_line

    spec = plan.spec
    lines = [
        f"startup {spec.name}: {len(plan.configs)} config(s) x ({spec.cold} cold + {spec.warm} warm) = "
        f"{len(plan.starts)} engine start(s)"
        + (f", then scenario {spec.scenario} after the last warm start" if spec.scenario else "")
    ]
    lines.append(
        "cold = empty compilation/engine caches (a fresh cache folder per start"
        + (", model cache too" if spec.cold_model else "; model files stay")
        + "); warm = the caches of the last cold start"
    )
    for config in plan.configs:
        lines.append(f"config {config.id}:")
        lines.append(f"  $ {shell_line(plan.command(config), config.flags)}")
    lines.append("Nothing was started (--plan).")
    return "\n".join(lines)
