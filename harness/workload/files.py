"""Files a scenario points to (prompt datasets, arrival traces): where a relative path starts,
and the content hash that enters the fingerprint (content, not location, defines the work)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.errors import UserError


def resolve(path: str, base_dir: Path | None) -> Path:
    """`path` relative to the scenario file's folder (`base_dir`), unless absolute."""
    p = Path(path)
    return p if p.is_absolute() or base_dir is None else base_dir / p


def content_id(data: bytes) -> str:
    return "sha256-" + hashlib.sha256(data).hexdigest()[:16]


def file_id(path: str, base_dir: Path | None, what: str) -> str:
    """Content hash of the file at `path`; a missing file is a one-line user error naming `what`."""
    p = resolve(path, base_dir)
    try:
        return content_id(p.read_bytes())
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot read {p} ({exc.strerror}); paths are relative to the scenario file") from None
