"""Durations as people write them: seconds (`30`, `2.5`) or Locust's spellings (`30s`, `5m`, `1h30m`).

Scenario and sweep files keep their `*_s` keys in seconds; this lets a value be written the way
Locust's `--run-time` and k6's `duration` are written, so `duration_s: 5m` means 300 seconds.
One parser serves the files (a pydantic type) and the command line (an argparse type).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

#: unit -> seconds; longest first so "ms" wins over "m"
_UNITS = {"ms": 0.001, "h": 3600.0, "m": 60.0, "s": 1.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|h|m|s)\s*")
_HINT = "write seconds (30, 2.5) or a duration like 30s, 5m, 1h30m, 500ms"


def parse_duration(value: str | float | int) -> float:
    """Seconds for `value`; ValueError with the accepted spellings when it is none of them."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration; {_HINT}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().lower()
    try:
        return float(text)
    except ValueError:
        pass
    if not text or _PART.sub("", text):
        raise ValueError(f"{value!r} is not a duration; {_HINT}")
    seconds = sum(float(num) * _UNITS[unit] for num, unit in _PART.findall(text))
    if not math.isfinite(seconds):
        raise ValueError(f"{value!r} is not a duration; {_HINT}")
    return seconds


def _coerce(value: Any) -> Any:
    """Strings become seconds; numbers and everything else go on to the field's own checks."""
    return parse_duration(value) if isinstance(value, str) else value


#: a `*_s` field that also takes `30s`, `5m`, `1h30m`
Seconds = Annotated[float, BeforeValidator(_coerce)]


def rename_duration_key(data: Any) -> Any:
    """`duration: 30s` is the same key as `duration_s: 30s` (Locust and k6 users write `duration`)."""
    if isinstance(data, dict) and "duration" in data:
        if "duration_s" in data:
            raise ValueError("duration and duration_s are the same setting; keep one")
        data = dict(data)
        data["duration_s"] = data.pop("duration")
    return data
