"""Files a scenario points to (prompt datasets, arrival traces): where a relative path starts,
how they are read, and the content hash that enters the fingerprint (content, not location,
defines the work).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.errors import UserError  # noqa: F401 - kept for callers that import it from here
from harness.scenario.inputs import read_input

__all__ = ["content_id", "file_id", "read_input", "resolve"]


def resolve(path: str, base_dir: Path | None) -> Path:
    """`path` relative to the scenario file's folder (`base_dir`), unless absolute."""
    p = Path(path)
    return p if p.is_absolute() or base_dir is None else base_dir / p


def content_id(data: bytes) -> str:
    return "sha256-" + hashlib.sha256(data).hexdigest()[:16]


def file_id(path: str, base_dir: Path | None, what: str) -> str:
    """Content hash of the file at `path`; a missing file is a one-line user error naming `what`."""
    return content_id(read_input(resolve(path, base_dir), f"{what} {path}"))
