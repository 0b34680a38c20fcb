"""The sweep plan: configs (one engine command line each) x scenarios x load levels x repeats = cells.

Everything here is pure: loading the sweep file, expanding `vary` into configs, resolving the
scenario files with their overrides, naming each config and cell. `harness sweep FILE --plan`
prints a Plan; the executor walks the same Plan, so what is printed is what runs.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.results.sweep_index import scenario_label
from harness.scenario.inputs import input_path, not_a_file
from harness.scenario.loader import (
    apply_overrides,
    format_validation_error,
    read_yaml,
    validate,
    written_nulls_unset,
)
from harness.scenario.models import Scenario
from harness.sweep.checks import check_sweep
from harness.sweep.flags import apply_flags, describe, flag_key, substitute
from harness.sweep.models import SweepFile

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=+-]")
MAX_ID = 80


@dataclass(frozen=True)
class Config:
    id: str
    flags: dict[str, Any]  # effective flags: base with the varied ones applied (None = removed)
    varied: dict[str, Any]  # the flags that differ from base (empty for the base config)
    overrides: dict[str, Any] = field(default_factory=dict)  # scenario overrides of this config
    replicas: int = 1  # engines started for this config (a fleet behind one load)

    @property
    def tensor_parallel(self) -> int:
        for name in ("tensor-parallel-size", "tp", "tp-size", "num-shard"):  # vLLM, SGLang, TGI
            value = _flag_value(self.flags, name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return 1

    @property
    def devices(self) -> int:
        """Devices (GPUs) the config uses: replicas x tensor parallelism."""
        return self.replicas * self.tensor_parallel


@dataclass(frozen=True)
class ScenarioRef:
    name: str  # unique within the sweep (the file's stem)
    path: Path


@dataclass(frozen=True)
class LoadLevel:
    """One step of the sweep's `loads`: the same engine, more (or fewer) users or requests/s.

    Levels run in the order given, on the engine already up for the config, so one start yields a
    latency-throughput curve per config instead of one point."""

    path: str  # load.concurrency | load.rate
    value: float | int

    @property
    def label(self) -> str:
        return f"{self.path.rsplit('.', 1)[-1]}={self.value:g}"


@dataclass
class Cell:
    id: str
    config: Config
    scenario: ScenarioRef
    repeat: int  # 1-based
    overrides: dict[str, Any]  # sweep + config + linked + load-level overrides, applied to the scenario file
    resolved: Scenario  # the scenario with its overrides, validated at plan time
    level: LoadLevel | None = None

    @property
    def what(self) -> str:
        """The scenario and load level, for progress lines and tables."""
        return scenario_label(self.scenario.name, self.level.label if self.level else None)

    @property
    def run_dir(self) -> str:
        return f"runs/{self.id}"


@dataclass
class Plan:
    sweep: SweepFile
    source: Path
    configs: list[Config]
    scenarios: list[ScenarioRef]
    cells: list[Cell]

    @property
    def base_dir(self) -> Path:
        return self.source.parent

    def cells_of(self, config: Config) -> list[Cell]:
        return [c for c in self.cells if c.config.id == config.id]

    def devices_of(self, config: Config, replica: int) -> str:
        """{devices} of one replica: its tensor-parallel share of engine.devices, in order."""
        devs = self.sweep.engine.devices or []
        tp = config.tensor_parallel
        return ",".join(devs[replica * tp : (replica + 1) * tp])

    def command(self, config: Config, port: int | str | None = None, replica: int = 0) -> list[str]:
        """The exact argv for `config` (port None leaves the `{port}` placeholder for display)."""
        from harness.engines import get_kind

        spec = self.sweep.engine
        argv = list(spec.command) if spec.command else get_kind(spec.kind).default_command(spec)
        values = {
            "model": spec.model,
            "host": spec.host,
            "python": sys.executable,
            "replica": replica,
            "devices": self.devices_of(config, replica),
        }
        if port is None and spec.port != "auto":
            port = spec.port
        if port is not None:
            values["port"] = port
        argv = substitute(argv, values)
        return apply_flags(argv, config.flags)

    def engine_starts(self) -> list[tuple[Config, list[Cell]]]:
        """The engine starts in order: one per config, or one per cell when cold_start."""
        out: list[tuple[Config, list[Cell]]] = []
        for config in self.configs:
            cells = self.cells_of(config)
            if self.sweep.cold_start:
                out.extend((config, [c]) for c in cells)
            elif cells:
                out.append((config, cells))
        return out


# ---------------------------------------------------------------- loading
def load_sweep(path: str | Path) -> SweepFile:
    path = Path(path)
    data = read_yaml(path)
    return validate(SweepFile, data, str(path))


def _safe_id(text: str) -> str:
    """A cell or config id that is one path part and one argument: flags joined by '+' rather than
    ',' (`harness compare` reads a comma as a list of run directories)."""
    text = re.sub(r"[{}\[\]\"' ]", "", text).replace(":", "-").replace("/", "_").replace(",", "+")
    text = _UNSAFE.sub("_", text) or "config"
    if len(text) > MAX_ID:
        # cut at a flag boundary: "gpu-memory-utilization=0.-44958499" read as a value of 0.
        # (the H200 tune's id); the flags left out are named by "+more", told apart by the digest
        suffix = f"+more-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
        head = text[: MAX_ID - len(suffix)]
        boundary = head.rfind("+")
        text = (head[:boundary] if boundary > 0 else head) + suffix
    return text


def _merge(base: dict[str, Any], varied: dict[str, Any]) -> dict[str, Any]:
    """base with varied applied, matching flags by key (`max_num_seqs` replaces `max-num-seqs`)."""
    out: dict[str, tuple[str, Any]] = {flag_key(k): (k, v) for k, v in base.items()}
    for k, v in varied.items():
        out[flag_key(k)] = (k, v)
    return {name: value for name, value in out.values()}


def _differs(base: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    b = {flag_key(k): v for k, v in base.items()}
    return {
        k: v
        for k, v in flags.items()
        if flag_key(k) not in b or b[flag_key(k)] != v or type(b[flag_key(k)]) is not type(v)
    }


def _norm(flags: dict[str, Any]) -> str:
    import json

    return json.dumps(
        {flag_key(k): v for k, v in sorted(flags.items(), key=lambda kv: flag_key(kv[0]))}, sort_keys=True, default=str
    )


def expand_configs(sweep: SweepFile) -> list[Config]:
    vary = sweep.vary
    base = dict(sweep.base)
    raw: list[tuple[str | None, dict[str, Any], dict[str, Any]]] = []  # (explicit id, varied, overrides)
    replicas: dict[int, int] = {}  # raw index -> replicas (list mode)
    if vary.mode == "list":
        raw = [(c.id, dict(c.flags), dict(c.overrides)) for c in vary.configs]
        replicas = {i: c.replicas for i, c in enumerate(vary.configs) if c.replicas is not None}
    elif vary.mode == "grid":
        names = list(vary.flags)
        for combo in itertools.product(*(vary.flags[n] for n in names)):
            raw.append((None, dict(zip(names, combo, strict=True)), {}))
    else:
        if vary.include_base is not False or not vary.flags:
            raw.append(("base", {}, {}))
        for name, values in vary.flags.items():
            raw.extend((None, {name: v}, {}) for v in values)

    configs: list[Config] = []
    seen_flags: dict[str, str] = {}
    used_ids: set[str] = set()
    for n_raw, (explicit, varied_in, overrides) in enumerate(raw):
        flags = _merge(base, varied_in)
        varied = _differs(base, flags)
        n_rep = replicas.get(n_raw, sweep.engine.replicas)
        key = _norm(flags) + repr(sorted(overrides.items())) + f"x{n_rep}"
        if key in seen_flags and explicit is None:
            continue  # a one-at-a-time value equal to base's is the base config
        seen_flags.setdefault(key, explicit or "")
        cid = explicit or (_safe_id(describe(varied)) if varied else "base")
        if cid in used_ids:
            if explicit:
                raise UserError(f"vary.configs: id {cid!r} is used twice; give each config its own id")
            n = 2
            while f"{cid}-{n}" in used_ids:
                n += 1
            cid = f"{cid}-{n}"
        used_ids.add(cid)
        linked = dict(overrides)
        for path, flag in vary.link.items():
            value = _flag_value(flags, flag)
            if value is not None and not isinstance(value, bool):
                linked[path] = value
        configs.append(Config(id=cid, flags=flags, varied=varied, overrides=linked, replicas=n_rep))
    return configs


def _flag_value(flags: dict[str, Any], name: str) -> Any:
    key = flag_key(name)
    for k, v in flags.items():
        if flag_key(k) == key:
            return v
    return None


def _scenario_refs(sweep: SweepFile, base_dir: Path, source: str) -> list[ScenarioRef]:
    refs: list[ScenarioRef] = []
    names: set[str] = set()
    missing = []
    for i, rel in enumerate(sweep.scenarios):
        path = input_path(base_dir, rel)
        why = not_a_file(path)
        if why == "is a directory, not a file":
            missing.append(f"{source}: scenarios[{i}]: {rel}: is a directory; list scenario YAML files")
            continue
        if why is not None:  # /dev/zero read as "no such file" (audit R17)
            missing.append(f"{source}: scenarios[{i}]: {rel}: {why} (paths are relative to the sweep file)")
            continue
        name = _safe_id(path.stem)
        n = 2
        while name in names:
            name = f"{_safe_id(path.stem)}-{n}"
            n += 1
        names.add(name)
        refs.append(ScenarioRef(name=name, path=path))
    if missing:
        raise UserError(*missing)
    return refs


def build_plan(path: str | Path, sweep: SweepFile | None = None) -> Plan:
    source = Path(path).resolve()
    sweep = sweep or load_sweep(source)
    check_sweep(sweep, source.parent, str(path))
    _check_command(sweep, str(path))
    configs = expand_configs(sweep)
    _check_external(sweep, configs, str(path))
    refs = _scenario_refs(sweep, source.parent, str(path))
    _check_links(sweep, configs, str(path))
    levels = _load_levels(sweep, configs, str(path))
    cells: list[Cell] = []
    problems: list[str] = []
    cache: dict[tuple[Path, str], Scenario] = {}
    for config in configs:
        for ref in refs:
            for level in levels:
                overrides = {**sweep.overrides, **config.overrides}
                if level is not None:
                    overrides[level.path] = level.value
                key = (ref.path, repr(sorted(overrides.items())))
                if key not in cache:
                    where = f"config {config.id}" + (f", {level.label}" if level else "")
                    try:
                        data = read_yaml(ref.path)
                        data = (
                            apply_overrides(data, written_nulls_unset(overrides)) if overrides else data
                        )  # a null unsets
                        cache[key] = validate(Scenario, data, f"{ref.path} ({where})")
                    except UserError as exc:
                        problems.extend(exc.lines)
                        continue
                stem = f"{config.id}__{ref.name}" + (f"__{_safe_id(level.label)}" if level else "")
                for r in range(1, sweep.repeats + 1):
                    cells.append(Cell(f"{stem}__r{r}", config, ref, r, overrides, cache[key], level))
    if problems:
        raise UserError(*dict.fromkeys(problems))
    return Plan(sweep=sweep, source=source, configs=configs, scenarios=refs, cells=cells)


def _check_external(sweep: SweepFile, configs: list[Config], source: str) -> None:
    """A server the sweep does not start cannot take other flags: say so instead of measuring the
    same server under several names."""
    from harness.engines import get_kind

    if get_kind(sweep.engine.kind).starts_engine:
        return
    if sweep.base:
        raise UserError(
            f"{source}: base: kind external starts nothing, so flags cannot apply; remove base "
            "(vary the load with loads, or use a kind that starts the engine)"
        )
    flagged = [c.id for c in configs if c.flags]
    if flagged:
        raise UserError(
            f"{source}: vary: kind external cannot change engine flags ({', '.join(flagged)}); "
            "vary the load with loads, or scenario overrides in vary.configs"
        )
    if sweep.cold_start:
        raise UserError(f"{source}: cold_start: kind external starts nothing; remove cold_start")


def _check_command(sweep: SweepFile, source: str) -> None:
    from harness.engines import get_kind

    spec = sweep.engine
    argv = spec.command or get_kind(spec.kind).default_command(spec)
    if spec.model is None and any("{model}" in a for a in [*argv, *spec.env.values()]):
        where = "engine.command" if spec.command else f"the default {spec.kind} command"
        raise UserError(f"{source}: engine.model: required, {where} uses {{model}}; set it to a model name or path")


def _load_levels(sweep: SweepFile, configs: list[Config], source: str) -> list[LoadLevel | None]:
    """The sweep's load levels ([None] without `loads`); a path also set another way is an error,
    since which value would win is not obvious from the file."""
    if not sweep.loads:
        return [None]
    ((path, values),) = sweep.loads.items()
    mode_paths = {"load.concurrency", "load.rate"}
    if any(p in mode_paths for p in sweep.overrides):
        taken = next(p for p in sweep.overrides if p in mode_paths)
        raise UserError(f"{source}: loads.{path}: overrides.{taken} sets the load too; keep one of them")
    for p, flag in sweep.vary.link.items():
        if p in mode_paths:
            raise UserError(
                f"{source}: loads.{path}: vary.link.{p} (from flag {flag}) sets the load too; keep one of them"
            )
    if any(p in mode_paths for c in configs for p in c.overrides):
        raise UserError(f"{source}: loads.{path}: a config's overrides set the load too; keep one of them")
    cast = int if path == "load.concurrency" else float
    return [LoadLevel(path, cast(v)) for v in values]


def _check_links(sweep: SweepFile, configs: list[Config], source: str) -> None:
    for path, flag in sweep.vary.link.items():
        if not any(path in c.overrides for c in configs):
            raise UserError(
                f"{source}: vary.link.{path}: no config sets flag {flag!r} to a value; link to a flag in base or vary"
            )


__all__ = [
    "Cell",
    "Config",
    "LoadLevel",
    "Plan",
    "ScenarioRef",
    "build_plan",
    "expand_configs",
    "format_validation_error",
    "load_sweep",
]
