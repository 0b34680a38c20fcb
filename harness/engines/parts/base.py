"""The engine-kind seam: everything the harness knows about one kind of serving engine.

One module per kind in harness/engines registers an object satisfying `EngineKind`; the sweep,
startup and tune drivers, telemetry, the engine-log analysis and the run's prefix-cache reset and
prompt calibration talk only to this Protocol (through harness.engines' lookups), so a new kind is
one module plus its test and recorded fixtures. The parts:

- launch: `default_command` (argv with {model} {host} {port} {python} placeholders), `default_env`,
  `cache_env` (what `harness startup` empties for a cold start), `starts_engine` (False: attach);
- readiness: `probe` (and `ready_path_for`, shown in the plan);
- /metrics: `metrics`, the Profile mapping its metric names to canonical quantities (its
  `prefixes` are how a page is recognised as this engine's), or `no_metrics` when the engine
  serves none; `telemetry_profile`: the engine kind a run started by a sweep is told;
- startup log: `facts` (a fact table) and `startup_facts` (the table plus derived facts);
- serving log: `log_patterns` (preemptions, recompiles, OOMs... counted over the window);
- tuning: `flags`, the kind's spelling of each guide knob, or why it has none;
- prefix cache: `reset_path` and `reset_prefix_cache`;
- tokenize: `tokenize`, the endpoint that counts a text's tokens (prompt calibration).

A part a kind does not have is None, with the reason in `lacks` (tests/engines/test_kinds.py
checks that every kind provides or explains each part).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from harness.engines.parts.facts import Fact, scan_facts
from harness.engines.parts.flags import FlagMap
from harness.engines.parts.http import Probe, post_reset, probe_get_200
from harness.engines.parts.logs import GENERIC, LogPatterns
from harness.engines.parts.metrics import Profile
from harness.registry import Registry

#: the optional parts: None on a kind that has no such thing, explained in its `lacks`
OPTIONAL_PARTS = ("metrics", "reset_path", "tokenize")


class EngineSettings(Protocol):
    """What a kind reads of the sweep file's `engine` block (harness.sweep.models.EngineSpec)."""

    ready_path: str | None
    reset_path: str | None


@dataclass(frozen=True)
class Tokenize:
    """An engine's tokenize endpoint: POST `path` with `body(model, text)` as JSON; `count` reads
    the number of tokens from the JSON answer (None when the answer has none)."""

    path: str
    body: Callable[[str, str], dict[str, Any]]
    count: Callable[[Any], int | None]


@runtime_checkable
class EngineKind(Protocol):
    """Read-only parts (properties here, so a kind may hold them as plain class attributes) and the
    few operations that need an engine's answer or a log."""

    @property
    def name(self) -> str: ...

    @property
    def aliases(self) -> tuple[str, ...]:
        """Other names a run's --engine-kind may give this kind (`vllm-cpu`)."""
        ...

    @property
    def lacks(self) -> Mapping[str, str]:
        """Why a part is None (part name -> reason)."""
        ...

    # ------------------------------------------------------------------ launch
    @property
    def starts_engine(self) -> bool:
        """False: the server is already running; nothing is started, stopped or restarted."""
        ...

    @property
    def cache_env(self) -> Mapping[str, str]:
        """Env var -> folder under a start's cache root, emptied for a cold start."""
        ...

    def default_command(self, spec: EngineSettings) -> list[str]: ...

    def default_env(self, spec: EngineSettings) -> dict[str, str]: ...

    # ------------------------------------------------------------------ readiness
    def ready_path_for(self, spec: EngineSettings) -> str: ...

    def probe(self, base_url: str, spec: EngineSettings) -> Probe: ...

    # ------------------------------------------------------------------ /metrics
    @property
    def metrics(self) -> Profile | None:
        """None: a page's profile is detected (or there is no page: `no_metrics`)."""
        ...

    @property
    def no_metrics(self) -> str | None:
        """The engine serves no Prometheus /metrics: why (telemetry records the engine side as absent)."""
        ...

    @property
    def telemetry_profile(self) -> str | None:
        """The engine kind a run started by a sweep is told."""
        ...

    # ------------------------------------------------------------------ logs
    @property
    def facts(self) -> Sequence[Fact]: ...

    @property
    def log_patterns(self) -> LogPatterns: ...

    def startup_facts(self, log_text: str) -> dict[str, Any]: ...

    # ------------------------------------------------------------------ tuning
    @property
    def flags(self) -> FlagMap: ...

    # ------------------------------------------------------------------ prefix cache, tokenize
    @property
    def reset_path(self) -> str | None: ...

    @property
    def tokenize(self) -> Tokenize | None: ...

    def reset_prefix_cache(self, base_url: str, spec: EngineSettings) -> str | None:
        """Reset the engine's prefix cache; None when done, else why it could not be."""
        ...


KINDS: Registry[EngineKind] = Registry("engine kind")


class HttpEngine:
    """Shared behaviour: readiness = first 200 on a GET path; reset = a POST path (or none).

    A kind sets the class attributes that differ; `flags` has no default on purpose (each kind
    says whose flag names it takes)."""

    name: ClassVar[str] = "http"
    aliases: ClassVar[tuple[str, ...]] = ()
    lacks: ClassVar[Mapping[str, str]] = {}
    starts_engine: ClassVar[bool] = True
    #: env var -> folder under a start's cache root: what `harness startup` empties for a cold start
    #: (TorchInductor's and Triton's caches, as `vllm bench startup` does; a kind adds its own)
    cache_env: ClassVar[Mapping[str, str]] = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}
    env: ClassVar[Mapping[str, str]] = {}
    ready_path: ClassVar[str] = "/health"
    metrics: ClassVar[Profile | None] = None
    no_metrics: ClassVar[str | None] = None
    telemetry_profile: ClassVar[str | None] = None
    facts: ClassVar[Sequence[Fact]] = ()
    log_patterns: ClassVar[LogPatterns] = GENERIC
    flags: ClassVar[FlagMap]
    reset_path: ClassVar[str | None] = None
    tokenize: ClassVar[Tokenize | None] = None

    def default_command(self, spec: EngineSettings) -> list[str]:
        raise NotImplementedError

    def default_env(self, spec: EngineSettings) -> dict[str, str]:
        return dict(self.env)

    def ready_path_for(self, spec: EngineSettings) -> str:
        return self.ready_path

    def probe(self, base_url: str, spec: EngineSettings) -> Probe:
        return probe_get_200(base_url, self.ready_path_for(spec))

    def startup_facts(self, log_text: str) -> dict[str, Any]:
        out = scan_facts(self.facts, log_text)
        self.derive_facts(out, log_text)
        return out

    def derive_facts(self, facts: dict[str, Any], log_text: str) -> None:
        """Facts computed from others (capture count from the size list, ...); per kind."""
        sizes = facts.get("cudagraph_sizes")
        if isinstance(sizes, list) and "cudagraph_count" not in facts:
            facts["cudagraph_count"] = len(sizes)

    def reset_prefix_cache(self, base_url: str, spec: EngineSettings) -> str | None:
        if not self.reset_path:
            return f"engine kind {self.name} has no prefix-cache reset endpoint"
        return post_reset(base_url, self.reset_path)


class AnyServer(HttpEngine):
    """A server the harness knows nothing about (custom, external): the sweep file names its ready
    and reset paths; its /metrics profile is detected from the page."""

    missing_reset = "engine.reset_path is not set; set it to the POST path that resets the cache"

    def ready_path_for(self, spec: EngineSettings) -> str:
        return spec.ready_path or self.ready_path

    def reset_prefix_cache(self, base_url: str, spec: EngineSettings) -> str | None:
        if not spec.reset_path:
            return self.missing_reset
        return post_reset(base_url, spec.reset_path)
