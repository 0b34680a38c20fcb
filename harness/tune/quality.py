"""The seam to the quality gate (harness.quality): whether one is available in this build.

The FP8 / quantization step accepts a change only with the gate passed; until the gate is
wired in, it reports "quality not checked" and changes nothing."""

from __future__ import annotations

import importlib.util


def gate_available() -> bool:
    return importlib.util.find_spec("harness.quality") is not None and False  # wired in when the gate's API is on main
