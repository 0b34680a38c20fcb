"""How an output is judged against a prompt's expected answers: one function per `match` value.

Every matcher gets the output text and one expected string and answers right/wrong; a prompt is
right when any of its expected strings matches. Text is compared after trimming whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Matcher = Callable[[str, str], bool]

_CHOICE = re.compile(r"[A-Za-z0-9]+")


def exact(output: str, expected: str) -> bool:
    """The whole output, trimmed, equals the answer."""
    return output.strip() == expected.strip()


def contains(output: str, expected: str) -> bool:
    """The answer appears anywhere in the output."""
    return expected.strip() in output


def regex(output: str, expected: str) -> bool:
    """The pattern matches somewhere in the output (`re.search`; anchor it with ^ for a prefix)."""
    return re.search(expected, output) is not None


def choice(output: str, expected: str) -> bool:
    """Multiple choice: the output's first word (letters/digits, e.g. "B" of "B) Paris" or "(b)")
    equals the answer, ignoring case."""
    m = _CHOICE.search(output)
    return m is not None and m.group(0).lower() == expected.strip().lower()


#: match name -> matcher (the file's "match" key)
MATCHERS: dict[str, Matcher] = {"exact": exact, "contains": contains, "regex": regex, "choice": choice}


def is_right(output: str, expected: tuple[str, ...], match: str) -> bool:
    fn = MATCHERS[match]
    return any(fn(output, e) for e in expected)
