"""Mask credentials in text a server sent back, before it is written anywhere.

Why: error bodies are stored (requests.jsonl `error_detail`, the preflight's messages), and a
proxy that echoes the request's `Authorization` header put the API key into the run directory.
The harness never writes the key itself; this keeps a server's echo of it out as well.
"""

from __future__ import annotations

import re

from harness.scenario.secrets import MASK  # one mask for files and echoes alike

_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{6,}"),  # Authorization schemes
    re.compile(
        r"(?i)\b((?:x-)?api[-_]?key|authorization|access[-_]?token|secret|password)\b(\"?\s*[:=]\s*\"?)[^\s\",;}]{4,}"
    ),
    re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_-]{8,}"),  # OpenAI-style keys
    re.compile(r"\bhf_[A-Za-z0-9]{16,}"),  # Hugging Face tokens
)


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with known secrets and anything shaped like a credential masked."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    text = _PATTERNS[0].sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _PATTERNS[1].sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _PATTERNS[2].sub(MASK, text)
    return _PATTERNS[3].sub(MASK, text)
