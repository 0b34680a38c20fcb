"""Files a scenario points to (prompt datasets, arrival traces): where a relative path starts,
how they are read, and the content hash that enters the fingerprint (content, not location,
defines the work).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from harness.scenario.inputs import read_input

__all__ = ["content_id", "file_id", "not_json", "read_input", "resolve"]


def resolve(path: str, base_dir: Path | None) -> Path:
    """`path` relative to the scenario file's folder (`base_dir`), unless absolute."""
    p = Path(path)
    return p if p.is_absolute() or base_dir is None else base_dir / p


def content_id(data: bytes) -> str:
    return "sha256-" + hashlib.sha256(data).hexdigest()[:16]


def file_id(path: str, base_dir: Path | None, what: str) -> str:
    """Content hash of the file at `path`; a missing file is a one-line user error naming `what`."""
    return content_id(read_input(resolve(path, base_dir), f"{what} {path}"))


def not_json(exc: ValueError) -> str:
    """Why json.loads refused a line: the decoder's message, or the ValueError's own text where it
    is no JSONDecodeError (a number past Python's 4300-digit limit for int conversion)."""
    return exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
