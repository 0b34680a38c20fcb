"""Reading an engine's startup log: fact tables (regex -> StartupFacts keys) and the failure hint.

A kind lists `fact(...)` entries; `scan_facts` keeps the first value of each key found in the log
of one engine start. Every key a kind reads must be a field of harness.results.models.facts
.StartupFacts (tests/results/test_models.py checks it), which is how the sweep index, startup.json
and tune.json carry them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def num(text: str) -> float | int:
    text = text.replace(",", "")
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


@dataclass(frozen=True)
class Fact:
    pattern: re.Pattern[str]
    keys: tuple[str, ...]  # one per group; "" skips a group
    convert: Callable[[str], Any] = num


def fact(regex: str, *keys: str, convert: Callable[[str], Any] = num) -> Fact:
    return Fact(re.compile(regex), keys, convert)


def int_list(text: str) -> list[int]:
    """`[512, 504, 8]` / `1, 2, 4` -> sorted ints (capture sizes, smallest first)."""
    return sorted(int(x) for x in re.findall(r"\d+", text))


def last_matches(regex: str, log_text: str) -> list[re.Match[str]]:
    return list(re.finditer(regex, strip_ansi(log_text)))


def scan_facts(facts: Sequence[Fact], log_text: str) -> dict[str, Any]:
    """The first value of each key found in the log (the log of one engine start)."""
    out: dict[str, Any] = {}
    text = strip_ansi(log_text)
    for f in facts:
        for m in f.pattern.finditer(text):
            for key, value in zip(f.keys, m.groups(), strict=False):
                if key and value is not None and key not in out:
                    try:
                        out[key] = f.convert(value)
                    except ValueError:
                        out[key] = value
            break
    return out


_PREFIX = re.compile(
    r"^(?:\([\w ]+pid=\d+\)\s*)?(?:(?P<level>[A-Z]+) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\]\s*)?"
)
_ERROR_START = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)|CUDA out of memory)\b:? .+|^(?:\S+ )*\S*: error: .+")
_GENERIC = ("Engine core initialization failed", "initialization failed")


def failure_hint(log_text: str) -> str | None:
    """The most telling error line of a failed start: the first line that begins with an
    exception (`ValueError: ...`) or an argparse `error:`, log prefixes stripped, warnings
    skipped; the root cause comes before generic wrappers such as 'initialization failed'."""
    hits = []
    for raw in strip_ansi(log_text).splitlines():
        m = _PREFIX.match(raw)
        level = m.group("level") if m else None
        if level in ("INFO", "WARNING", "DEBUG"):
            continue
        line = raw[m.end() :].strip() if m else raw.strip()
        if _ERROR_START.match(line):
            hits.append(line)
    specific = [h for h in hits if not any(g in h for g in _GENERIC)]
    if specific:
        return specific[0][:400]
    return hits[-1][:400] if hits else None
