"""Engine profiles, one module per engine, registered by name in `PROFILES`."""

from harness.telemetry.profiles import llamacpp, sglang, tgi, vllm  # noqa: F401 - registration
from harness.telemetry.profiles.base import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    KIND_ALIASES,
    KINDS_WITHOUT_METRICS,
    PROFILES,
    Profile,
    detect,
)

__all__ = ["COUNTERS", "GAUGES", "HISTOGRAMS", "KINDS_WITHOUT_METRICS", "KIND_ALIASES", "PROFILES", "Profile", "detect"]
