"""Pydantic models of the sweep file: which engine to restart, which flags to vary, what to run.

Every model forbids unknown keys (a typo is an error, not a silently ignored setting). Flag names
are written without the leading dashes (`max-num-seqs`); values are scalars, booleans (rendered
`--x` / `--no-x`), dicts or lists (rendered as JSON), or null (the flag is removed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.engines import kind_names
from harness.scenario.durations import Seconds, rename_duration_key
from harness.scenario.quality import QualitySpec

FlagValue = str | int | float | bool | dict[str, Any] | list[Any] | None
Flags = dict[str, FlagValue]

_ID = r"^[A-Za-z0-9_.=,+-]+$"
#: scenario fields a sweep's `loads` may step through (closed-loop users or open-loop rate)
LOAD_PATHS = ("load.concurrency", "load.rate")


class Strict(BaseModel):
    # allow_inf_nan: `.inf` passes every `> 0` check (a ready timeout of .inf waits forever)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _check_flag_names(flags: dict[str, Any]) -> dict[str, Any]:
    for name in flags:
        if name.startswith("env:"):  # the engine's environment variable (harness.sweep.flags)
            var = name[4:]
            if not var or "=" in var or "\0" in var or any(c.isspace() for c in var):
                raise ValueError(
                    f"flag name {name!r}: env: takes an environment variable name, like env:PREFIX_CACHING"
                )
            continue
        if not name or not name.lstrip("-") or any(c.isspace() for c in name) or "=" in name:
            raise ValueError(f"flag name {name!r} is not a flag; write it like max-num-seqs")
    return flags


#: one module per engine kind in harness/engines (each registers itself under its module's name;
#: tests/sweep/test_kinds_literal.py checks the two agree): the `kind` choices follow the modules, so
#: a new engine kind is one file, not an edit here too
if TYPE_CHECKING:  # a Literal built at import time is not a type to mypy: a name, to it
    EngineKindName = str
else:
    EngineKindName = Literal[tuple(kind_names())]


class EngineSpec(Strict):
    kind: EngineKindName
    command: Annotated[list[str], Field(min_length=1)] | None = Field(
        default=None,
        description="argv list (never run through a shell) with {port}, {model}, {host} placeholders; "
        "default: the kind's usual launcher",
    )
    model: str | None = Field(default=None, description="fills {model} in the command")
    served_model_name: str | None = Field(
        default=None, description="model name the load asks for; none = first of /v1/models"
    )
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = Field(default=None, description="working directory, relative to the sweep file")
    host: str = "127.0.0.1"
    port: int | Literal["auto"] = Field(default="auto", description="fixed port or a free one per start")
    ready_timeout_s: Annotated[Seconds, Field(gt=0)] = 600.0
    stop_timeout_s: Annotated[Seconds, Field(gt=0)] = 30.0
    ready_path: str | None = Field(default=None, description="custom kind: GET path that answers 200 when ready")
    reset_path: str | None = Field(default=None, description="custom kind: POST path that resets the prefix cache")
    gpu_release_timeout_s: Annotated[Seconds, Field(ge=0)] = 60.0
    url: str | None = Field(
        default=None, description="kind external: base URL of a server already running (nothing is started or stopped)"
    )
    replicas: Annotated[int, Field(ge=1, le=16)] = Field(
        default=1,
        description="engines per config, each on its own port, the load routed over them (target.routing); "
        "{replica} (0, 1, ...) and {devices} fill the command and env",
    )
    devices: list[str] | None = Field(
        default=None,
        description="device ids (e.g. GPUs) shared out to the replicas in order: each gets tensor-parallel-"
        'size of them as {devices} ("0,1"), e.g. env CUDA_VISIBLE_DEVICES: "{devices}"',
    )

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        """What exec can take: a NUL passed --plan and then failed every cell with `harness error:
        ValueError: embedded null byte` (audit R18)."""
        for name, value in v.items():
            if not name or "=" in name or "\0" in name:
                raise ValueError(f"env {name[:40]!r}: not an environment variable name")
            if "\0" in value:
                raise ValueError(f"env {name}: the value holds a NUL byte (\\0), which no process environment can")
        return v

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and any("\0" in a for a in v):
            raise ValueError("an argument holds a NUL byte (\\0), which no command line can")
        return v

    @field_validator("port")
    @classmethod
    def _port(cls, v: int | str) -> int | str:
        if isinstance(v, int) and not 0 < v < 65536:
            raise ValueError("port must be 1-65535 or auto")
        return v

    @model_validator(mode="after")
    def _custom(self) -> EngineSpec:
        if self.kind == "custom" and not self.command:
            raise ValueError("kind custom needs a command (argv list with {port})")
        if self.kind == "external":
            if not self.url or not self.url.startswith(("http://", "https://")):
                raise ValueError("kind external needs url: the running server's base URL, e.g. http://10.0.0.5:8000")
            if self.command:
                raise ValueError("kind external starts nothing; remove command (or use kind custom to start a server)")
            return self
        if self.replicas > 1 and self.port != "auto":
            raise ValueError("replicas > 1 needs port: auto (each replica listens on its own free port)")
        if self.url is not None:
            raise ValueError(
                f"url is for kind external (a server already running); kind {self.kind} is started at host:port"
            )
        if self.command and self.port == "auto" and not any("{port}" in a for a in self.command):
            raise ValueError("command has no {port} placeholder; add one or set a fixed port")
        return self


class ListedConfig(Strict):
    id: Annotated[str, Field(pattern=_ID)] | None = None
    flags: Flags = Field(default_factory=dict)
    replicas: Annotated[int, Field(ge=1, le=16)] | None = Field(
        default=None,
        description="engines of this config (default engine.replicas): TP=2 x 1 vs TP=1 x 2 on equal devices",
    )
    overrides: dict[str, Any] = Field(default_factory=dict, description="scenario overrides for this config only")

    @field_validator("flags")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_flag_names(v)


class Vary(Strict):
    """How configs are made from `base`.

    one-at-a-time: each listed flag takes each of its values alone, the others staying at base
    (plus the base config itself when `include_base`). grid: every combination. list: `configs`.
    """

    mode: Literal["one-at-a-time", "grid", "list"] = "one-at-a-time"
    flags: dict[str, Annotated[list[FlagValue], Field(min_length=1)]] = Field(default_factory=dict)
    configs: list[ListedConfig] = Field(default_factory=list)
    include_base: bool | None = Field(default=None, description="one-at-a-time: also run base alone (default true)")
    link: dict[str, str] = Field(
        default_factory=dict,
        description='scenario override path -> flag whose value it takes, e.g. {"load.concurrency": "max-num-seqs"}',
    )

    @field_validator("flags")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_flag_names(v)

    @model_validator(mode="after")
    def _shape(self) -> Vary:
        if self.mode == "list":
            if not self.configs:
                raise ValueError("mode list needs configs: [{id, flags}, ...]")
            if self.flags:
                raise ValueError("mode list takes configs, not flags; move the values into configs")
        else:
            if self.configs:
                raise ValueError(f"configs is for mode list; mode {self.mode} takes flags: {{name: [values]}}")
            if not self.flags and self.mode == "grid":
                raise ValueError("mode grid needs flags: {name: [values]}")
        if self.include_base is not None and self.mode != "one-at-a-time":
            raise ValueError("include_base applies to mode one-at-a-time only")
        for path, flag in self.link.items():
            if not path or "." not in path:
                raise ValueError(f"link key {path!r} must be a scenario field path such as load.concurrency")
            if not flag.lstrip("-"):
                raise ValueError(f"link {path}: name the flag whose value it takes")
        return self


class SweepWarmup(Strict):
    """Traffic after each engine start, before measuring; replaces the scenarios' own warmup."""

    requests: Annotated[int, Field(ge=0)] = 0
    duration_s: Annotated[Seconds, Field(ge=0)] = 0.0
    every_cell: bool = Field(default=False, description="warm up before every cell, not only after a start")

    _duration_key = model_validator(mode="before")(rename_duration_key)


class SweepFile(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    engine: EngineSpec
    base: Flags = Field(default_factory=dict)
    vary: Vary = Field(default_factory=Vary)
    scenarios: Annotated[list[str], Field(min_length=1)] = Field(description="scenario files, relative to this file")
    overrides: dict[str, Any] = Field(default_factory=dict, description="scenario overrides for every cell")
    loads: dict[str, Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1)]] = Field(
        default_factory=dict,
        description="load levels run against every config without a restart, e.g. {load.concurrency: [1, 8, 32]}",
    )
    slo_attainment: Annotated[float, Field(gt=0, le=1)] = Field(
        default=0.95, description="with loads: a load level is within the SLOs when this share of requests met them"
    )
    repeats: Annotated[int, Field(ge=1)] = 1
    warmup: SweepWarmup | None = None
    reset_prefix_cache_between: bool = True
    cold_start: bool = Field(default=False, description="a fresh engine for every cell, not one per config")
    quality: QualitySpec | None = Field(
        default=None, description="output quality per config, once after the first cell (outside its measured window)"
    )

    @field_validator("base")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_flag_names(v)

    @field_validator("loads")
    @classmethod
    def _loads(cls, v: dict[str, list[float]]) -> dict[str, list[float]]:
        """One load dimension (the x of each config's latency-throughput curve), distinct values."""
        if len(v) > 1:
            raise ValueError("vary one load dimension: {load.concurrency: [1, 8, 32]} or {load.rate: [1, 4, 16]}")
        for path, values in v.items():
            if path not in LOAD_PATHS:
                raise ValueError(f"{path!r} is not a load level; use {' or '.join(LOAD_PATHS)}")
            if path == "load.concurrency" and any(x != int(x) for x in values):
                raise ValueError("load.concurrency levels are whole numbers of users")
            if len(set(values)) != len(values):
                raise ValueError(f"{path}: a level is listed twice ({values})")
        return v
