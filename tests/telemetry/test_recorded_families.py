"""SGLang and TGI profiles against the metric families the real releases declare.

Neither engine can run on this project's CPU-only CI (SGLang 0.5.23 needs CUDA 13 packages and
its CUDA kernel wheel; TGI's router is a Rust binary not on any registry this project reaches),
so their profiles are verified only against these recordings, taken from the released sources
(tests/telemetry/data/*_metric_families.txt; how each was read is in its header). Every name a
profile reads must be declared there, with the type the profile treats it as.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.telemetry.profiles import PROFILES

DATA = Path(__file__).parent / "data"


def families(path: Path) -> dict[str, str]:
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


@pytest.mark.parametrize("profile,recording,optional", [
    ("sglang", "sglang_0.5.23_metric_families.txt", set()),
    # counters keep their name in metrics-exporter-prometheus 0.15; the `_total` spelling is a fallback
    ("tgi", "tgi_db931fc_metric_families.txt", {"tgi_request_success_total"}),
])
def test_every_name_the_profile_reads_is_declared_with_its_type(profile, recording, optional):
    exposed = components(families(DATA / recording))
    prof = PROFILES.get(profile)
    for name in sorted(prof.counter_like_names() - optional):
        assert exposed.get(name) == "counter", f"{profile}: {name} is {exposed.get(name)} in {recording}"
    for name in sorted(prof.gauge_names() - optional):
        assert exposed.get(name) == "gauge", f"{profile}: {name} is {exposed.get(name)} in {recording}"
    # each canonical quantity the profile maps finds at least one declared name
    for canonical, cands in {**prof.gauges, **prof.counters}.items():
        assert any(c in exposed for c in cands), (profile, canonical, cands)


def test_the_recordings_hold_what_the_profiles_promise():
    sgl = families(DATA / "sglang_0.5.23_metric_families.txt")
    assert sgl["sglang_token_usage"] == "gauge" and sgl["sglang_cache_hit_rate"] == "gauge"  # last batch only: unused
    assert sgl["sglang_num_retracted_requests_total"] == "counter"
    tgi = families(DATA / "tgi_db931fc_metric_families.txt")
    assert not any("prefix" in n or "kv_cache" in n for n in tgi)  # TGI exports no KV-usage or prefix-cache metric
