"""Every registered engine kind provides each part, or says why it lacks it; each has its own test
module and the recorded fixtures its parts are checked against. Adding a kind is one module in
harness/engines plus tests/engines/test_<kind>.py and tests/engines/data/<kind>/ (CONTRIBUTING.md,
"Adding an engine kind"): this test fails until all three are there."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from harness.engines import (
    EngineKind,
    LogPatterns,
    Profile,
    Tokenize,
    detect_profile,
    detect_regex,
    find_kind,
    get_kind,
    kind_names,
    log_patterns,
    profiles,
    reset_paths,
    run_kind_names,
)
from harness.engines.parts.base import OPTIONAL_PARTS
from harness.engines.parts.facts import Fact
from harness.engines.parts.flags import GUIDE_KNOBS, FlagMap
from harness.engines.parts.logs import EVENTS
from harness.errors import UserError
from harness.results.models.facts import StartupFacts
from harness.sweep.models import EngineKindName, EngineSpec

HERE = Path(__file__).parent
DATA = HERE / "data"
KINDS = kind_names()


def _spec(name: str) -> EngineSpec:
    extra = {"url": "http://127.0.0.1:9"} if not get_kind(name).starts_engine else {"command": ["x", "{port}"]}
    return EngineSpec(kind=name, **extra)


def _owner(name: str, part: str) -> str:
    """The first kind (documented order) holding this very part object: whose recordings check it."""
    obj = getattr(get_kind(name), part)
    return next(k for k in KINDS if getattr(get_kind(k), part) is obj)


@pytest.mark.parametrize("name", KINDS)
def test_every_part_is_provided_or_its_absence_explained(name: str) -> None:
    kind = get_kind(name)
    assert isinstance(kind, EngineKind) and kind.name == name  # every Protocol member is there
    spec = _spec(name)
    # launch: an argv with the port placeholder (or none: the sweep file gives it / nothing starts)
    argv = kind.default_command(spec)
    assert all(isinstance(a, str) for a in argv) and (not argv or "{port}" in argv)
    assert argv or name == "custom" or not kind.starts_engine
    assert all(isinstance(v, str) for v in [*kind.default_env(spec).values(), *kind.cache_env.values()])
    # readiness
    assert kind.ready_path_for(spec).startswith("/")
    # /metrics: a profile that recognises its pages, or why there is none
    if kind.metrics is not None:
        assert isinstance(kind.metrics, Profile) and kind.metrics.prefixes and kind.metrics.prom_prefix
        assert kind.telemetry_profile == kind.metrics.name and kind.no_metrics is None
    assert kind.no_metrics is None or kind.metrics is None
    # startup facts: each key is a StartupFacts field, so index.json and startup.json can carry it
    assert all(isinstance(f, Fact) and f.pattern.groups == len(f.keys) for f in kind.facts)  # a key per group
    assert {k for f in kind.facts for k in f.keys if k} <= set(StartupFacts.model_fields)
    assert isinstance(kind.startup_facts(""), dict)
    # serving log: only the events the engine-log analysis counts
    assert isinstance(kind.log_patterns, LogPatterns) and set(kind.log_patterns.patterns) <= set(EVENTS)
    # flags: every guide knob is this kind's flag or a reason it has none, and nothing else
    assert isinstance(kind.flags, FlagMap) and set(kind.flags.knobs) == set(GUIDE_KNOBS)
    assert all(k.flag or k.why_missing for k in kind.flags.knobs.values())
    # prefix-cache reset and tokenize
    assert kind.reset_path is None or kind.reset_path.startswith("/")
    assert kind.tokenize is None or (isinstance(kind.tokenize, Tokenize) and kind.tokenize.path.startswith("/"))
    # a part that is None says why; a part that is there is not said to be lacking
    for part in OPTIONAL_PARTS:
        assert (getattr(kind, part) is None) == (part in kind.lacks) or (part == "metrics" and kind.no_metrics), (
            name,
            part,
        )
        assert part not in kind.lacks or kind.lacks[part]
    assert set(kind.lacks) <= set(OPTIONAL_PARTS)


@pytest.mark.parametrize("name", KINDS)
def test_every_kind_has_its_test_and_recordings(name: str) -> None:
    assert (HERE / f"test_{name}.py").is_file(), f"tests/engines/test_{name}.py: the kind's own test"
    kind = get_kind(name)
    if kind.facts:  # a fact table is checked against a recorded startup log of the kind that owns it
        owner = _owner(name, "facts")
        assert list((DATA / owner).glob("*.log")), f"tests/engines/data/{owner}/: a recorded startup log"
    if kind.metrics is not None:  # a profile against a recorded /metrics page or the families the engine declares
        assert list((DATA / kind.metrics.name).glob("*.txt")), f"tests/engines/data/{kind.metrics.name}/: /metrics"


def test_lookups_go_through_the_registry() -> None:
    assert list(typing.get_args(EngineKindName)) == KINDS  # the sweep file's choices follow the modules
    with pytest.raises(UserError, match="unknown engine kind 'vlm'; choose one of: custom, external"):
        get_kind("vlm")
    assert find_kind("vllm-cpu") is get_kind("vllm") and find_kind("nope") is None and find_kind(None) is None
    assert set(run_kind_names()) == {
        n for k in KINDS if get_kind(k).telemetry_profile for n in (k, *get_kind(k).aliases)
    }
    # the reset paths a run tries on a server of unknown kind: every kind's, vLLM's first
    assert reset_paths() == tuple(dict.fromkeys(get_kind(k).reset_path for k in KINDS if get_kind(k).reset_path))
    assert reset_paths()[0] == "/reset_prefix_cache"
    assert log_patterns("no-such-engine").classify("RuntimeError: CUDA error: misaligned address") == "cuda_error"
    assert log_patterns("no-such-engine").name == "generic"


def test_profiles_and_detection_come_from_the_kinds() -> None:
    assert set(profiles().names()) == {get_kind(k).metrics.name for k in KINDS if get_kind(k).metrics}
    with pytest.raises(UserError, match="unknown engine profile 'vlm'; choose one of: llamacpp"):
        profiles().get("vlm")
    for pname in profiles():
        prof = profiles().get(pname)
        assert detect_profile([f"{prof.prefixes[0]}anything", "python_gc_objects_collected_total"]) is prof
        assert f"{prof.prom_prefix}.+" in detect_regex().split("|")
    assert detect_profile(["process_cpu_seconds_total"]) is None
