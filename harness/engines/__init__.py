"""Engine kinds: one module per kind in this folder, registered by name.

A kind is everything the harness knows about one kind of serving engine, behind one Protocol
(harness.engines.parts.base.EngineKind): how to launch it and when it is ready, its /metrics
profile (and so how a page is recognised as its), its startup-log facts and serving-log patterns,
its spelling of the tuning guides' flags (and which it lacks), its prefix-cache reset and its
tokenize endpoint. The sweep, startup and tune drivers, telemetry, the engine-log analysis and the
run's prefix-cache isolation and prompt calibration ask the lookups below and know no kind by name,
so a new kind is one module here (registering itself under its module's name) plus its test and
recorded fixtures (CONTRIBUTING.md, "Adding an engine kind").

`parts/` holds what kinds are made of (fact tables, metric profiles, log patterns, flag maps, HTTP
probes); it is not a kind. This package sits below telemetry in the layers and imports none.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

from harness.engines.parts.base import KINDS, EngineKind, EngineSettings, Tokenize
from harness.engines.parts.facts import failure_hint
from harness.engines.parts.http import Probe
from harness.engines.parts.logs import GENERIC, LogPatterns
from harness.engines.parts.metrics import Profile
from harness.registry import Registry

#: the documented order of the kinds (sweep file choices, reset paths tried); later kinds follow by name
_LISTED_FIRST = ("vllm", "sglang", "tgi", "llamacpp", "sim", "transformers", "custom", "external")


_registered = False


def _register_all() -> None:
    """Import every kind module of this folder once (each registers itself under its module name)."""
    global _registered
    if _registered:
        return
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg and not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    _registered = True


def kind_names() -> list[str]:
    """Every kind, in the documented order."""
    _register_all()
    names = KINDS.names()
    return [k for k in _LISTED_FIRST if k in names] + [k for k in names if k not in _LISTED_FIRST]


def get_kind(name: str) -> EngineKind:
    """The kind named (a one-line UserError with the choices for an unknown name)."""
    _register_all()
    return KINDS.get(name)


def find_kind(name: str | None) -> EngineKind | None:
    """The kind a run's engine-kind hint names (a kind, a profile name or an alias), or None."""
    if not name:
        return None
    _register_all()
    if name in KINDS:
        return KINDS.get(name)
    for k in kind_names():
        kind = KINDS.get(k)
        if name in kind.aliases:
            return kind
    return None


def run_kind_names() -> list[str]:
    """The choices of `--engine-kind`: the kinds that tell a run something (their telemetry
    profile or its absence) and their aliases; custom and external servers are detected."""
    out: set[str] = set()
    for k in kind_names():
        kind = KINDS.get(k)
        if kind.telemetry_profile:
            out.update((kind.name, *kind.aliases))
    return sorted(out)


# ---------------------------------------------------------------- /metrics
_PROFILES: Registry[Profile] | None = None


def profiles() -> Registry[Profile]:
    """The distinct /metrics profiles of the kinds, by profile name (`telemetry.profile` choices)."""
    global _PROFILES
    if _PROFILES is None:
        reg: Registry[Profile] = Registry("engine profile")
        for k in kind_names():
            prof = KINDS.get(k).metrics
            if prof is not None and prof.name not in reg:
                reg.add(prof.name, prof)
        _PROFILES = reg
    return _PROFILES


def detect_profile(names: Iterable[str]) -> Profile | None:
    """The profile whose prefixes cover the most of a page's (normalized) names; ties go to the
    first by name."""
    names = list(names)
    best, best_hits = None, 0
    reg = profiles()
    for pname in reg:
        prof = reg.get(pname)
        hits = sum(1 for n in names if n.startswith(prof.prefixes))
        if hits > best_hits:
            best, best_hits = prof, hits
    return best


def detect_regex() -> str:
    """PromQL name regex of every profile's metrics (Prometheus mode's detection query)."""
    reg = profiles()
    return "|".join(f"{reg.get(p).prom_prefix}.+" for p in reg)


def hint_profile(engine_kind: str | None) -> Profile | None:
    """The /metrics profile a run's engine-kind hint implies (None: detect it)."""
    kind = find_kind(engine_kind)
    return kind.metrics if kind is not None else None


def no_metrics_reason(engine_kind: str | None) -> str | None:
    """Why the hinted engine has no /metrics to scrape, or None when it may have one."""
    kind = find_kind(engine_kind)
    return kind.no_metrics if kind is not None else None


# ---------------------------------------------------------------- logs, cache reset, tokenize
def log_patterns(engine_kind: str | None) -> LogPatterns:
    """The serving-log table of the hinted kind; unknown kinds get the common patterns."""
    kind = find_kind(engine_kind)
    return kind.log_patterns if kind is not None else GENERIC


def reset_paths() -> tuple[str, ...]:
    """Every kind's prefix-cache reset path, in the documented order: what a run tries on a server
    whose kind it is not told (the first 2xx wins)."""
    out: list[str] = []
    for k in kind_names():
        path = KINDS.get(k).reset_path
        if path and path not in out:
            out.append(path)
    return tuple(out)


def tokenize_for(engine_kind: str | None) -> Tokenize | None:
    """The tokenize endpoint of the hinted kind; vLLM's form for a server of unknown kind."""
    kind = find_kind(engine_kind) or get_kind("vllm")
    return kind.tokenize


__all__ = [
    "KINDS",
    "EngineKind",
    "EngineSettings",
    "LogPatterns",
    "Probe",
    "Profile",
    "Tokenize",
    "detect_profile",
    "detect_regex",
    "failure_hint",
    "find_kind",
    "get_kind",
    "hint_profile",
    "kind_names",
    "log_patterns",
    "no_metrics_reason",
    "profiles",
    "reset_paths",
    "run_kind_names",
    "tokenize_for",
]
