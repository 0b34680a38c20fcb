"""What the engine-kind tests share: the recorded fixtures (tests/engines/data/<kind>/) and ways to
read them through the real parts of the harness that use them (telemetry's window and block)."""

from __future__ import annotations

from pathlib import Path

from harness.engines import profiles
from harness.telemetry.block import build_block
from harness.telemetry.exposition import parse
from harness.telemetry.window import WindowAccumulator

DATA = Path(__file__).parent / "data"


def recorded(kind: str, name: str) -> str:
    return (DATA / kind / name).read_text()


def families(path: Path) -> dict[str, str]:
    """A recording of the metric families an engine declares: `name type` per line, `#` comments."""
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, typ = line.split()
            out[name.replace(":", "_")] = typ
    return out


def components(fams: dict[str, str]) -> dict[str, str]:
    """Exposed sample names -> how the profile may read them (counter-like or gauge)."""
    out = {}
    for name, typ in fams.items():
        if typ in ("histogram", "summary"):
            for suffix in ("_sum", "_count") + (("_bucket",) if typ == "histogram" else ()):
                out[name + suffix] = "counter"
        else:
            out[name] = typ
    return out


def assert_profile_reads_only_declared_names(
    profile_name: str, recording: Path, optional: set[str] = frozenset()
) -> None:
    """Every name the profile reads is declared in the recording, with the type the profile treats
    it as; each canonical quantity it maps finds at least one declared name (unless all its
    candidates are `optional`: names of other releases)."""
    exposed = components(families(recording))
    prof = profiles().get(profile_name)
    for name in sorted(prof.counter_like_names() - optional):
        assert exposed.get(name) == "counter", f"{profile_name}: {name} is {exposed.get(name)} in {recording.name}"
    for name in sorted(prof.gauge_names() - optional):
        assert exposed.get(name) == "gauge", f"{profile_name}: {name} is {exposed.get(name)} in {recording.name}"
    for canonical, cands in {**prof.gauges, **prof.counters}.items():
        if set(cands) <= optional:
            continue
        assert any(c in exposed for c in cands), (profile_name, canonical, cands)


def window_block(profile_name: str, *pages: str, expected: float | None = None) -> dict:
    """summary.json's engine block of /metrics pages scraped 10 s apart, read with the profile."""
    snaps = [parse(t, float(i * 10)) for i, t in enumerate(pages)]
    acc = WindowAccumulator(profiles().get(profile_name), snaps[0])
    for s in snaps[1:]:
        acc.add(s)
    return build_block(acc, source="direct", scrapes=acc.scrapes, expected_hit_rate=expected)
