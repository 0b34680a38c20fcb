"""What a driver needs around one engine start: its environment, working directory, the process
(one, a fleet of replicas, or an attached external engine), and the record that lets a resumed
sweep stop an engine a killed one left running.

The sweep executor (harness.sweep.execute) and the startup runner (harness.startup.execute) both
start engines; they share these helpers so an engine's env and cwd mean the same in both.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.sweep.flags import substitute, with_env
from harness.sweep.launcher import (
    AttachedEngine,
    EngineProcess,
    FleetEngines,
    free_port,
    start_ticks,
    stop_leftover,
)
from harness.sweep.plan import Config, Plan
from harness.sweep.results import atomic_write

ENGINE_RECORD = "engine.json"  # in the sweep directory while an engine of this sweep runs


def engine_env(kind: Any, spec: Any, values: dict[str, Any], flags: dict[str, Any] | None = None) -> dict[str, str]:
    """The engine's environment: ours, the kind's defaults, the spec's `env` with its
    `{port}`-style placeholders filled from `values`, then the config's `env:NAME` flags."""
    env = dict(os.environ)
    env.update(kind.default_env(spec))
    for k, v in spec.env.items():
        env[k] = substitute([v], values)[0]
    return with_env(env, flags or {})


def engine_cwd(spec: Any, base_dir: Path) -> Path | None:
    """The engine's working directory: `cwd` as written, a relative one from the plan's folder."""
    if spec.cwd is None:
        return None
    path = Path(spec.cwd)
    return path if path.is_absolute() else (base_dir / path).resolve()


@dataclass
class Launch:
    """One config's engine, not yet started, and what its cells' index entries add."""

    proc: EngineProcess | AttachedEngine | FleetEngines
    urls: list[str]  # every replica's base URL (one unless engine.replicas)
    extra: dict[str, Any] = field(default_factory=dict)  # index entry fields for the cells


def build_engine(
    plan: Plan, kind: Any, config: Config, out: Path, port: int | None, argv: list[str], base_url: str
) -> Launch:
    """The process for `config` on `port`: an attached external engine (port None), one process,
    or a fleet of replicas (replica 0 on `port`, the others on free ports of their own, the load
    routed over them by the scenario)."""
    spec = plan.sweep.engine
    if not kind.starts_engine:
        return Launch(AttachedEngine(base_url), [base_url])

    def env(rport: int, replica: int) -> dict[str, str]:
        values = {
            "port": rport,
            "model": spec.model,
            "host": spec.host,
            "replica": replica,
            "devices": plan.devices_of(config, replica),
        }
        return engine_env(kind, spec, values, config.flags)

    cwd = engine_cwd(spec, plan.base_dir)
    assert port is not None  # only an attached engine (returned above) has no port of its own
    urls = [base_url]
    extra: dict[str, Any] = {}
    proc: EngineProcess | FleetEngines
    if config.replicas > 1:
        members = []
        for r in range(config.replicas):
            rport = port if r == 0 else free_port(spec.host)
            member = EngineProcess(
                plan.command(config, rport, r), out / f"logs/{config.id}.r{r}.log", env=env(rport, r), cwd=cwd
            )
            member.port = rport
            members.append(member)
            if r:
                urls.append(f"http://{spec.host}:{rport}")
        proc = FleetEngines(members)
        extra.update(replicas=config.replicas, devices=config.devices, endpoints=list(urls))
    else:
        proc = EngineProcess(argv, out / f"logs/{config.id}.log", env=env(port, 0), cwd=cwd)
        proc.port = port
    extra["devices"] = config.devices
    return Launch(proc, urls, extra)


def note_engine(out: Path, proc: EngineProcess | FleetEngines) -> None:
    """Record the running engine's process group, so a resume after `kill -9` of the sweep can stop it."""
    if proc.pid is None:
        return
    data = {"pgid": proc.pid, "start_ticks": start_ticks(proc.pid), "argv": proc.argv}
    atomic_write(out / ENGINE_RECORD, json.dumps(data) + "\n")


def stop_recorded_engine(out: Path) -> int | None:
    """Stop the engine an interrupted sweep left running (if its record says one still runs);
    returns its process group when one was stopped. The record is removed either way."""
    path = out / ENGINE_RECORD
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    stopped = stop_leftover(int(data["pgid"]), data.get("start_ticks"))
    path.unlink(missing_ok=True)
    return int(data["pgid"]) if stopped else None
