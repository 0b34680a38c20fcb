"""The writer Protocol and its registry."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from harness.registry import Registry
from harness.report.document import Document


class ReportWriter(Protocol):
    """Renders a Document as one file in `out_dir` and returns its path."""

    name: str  # the registry key, e.g. "md"
    filename: str  # e.g. "report.md"

    def write(self, doc: Document, out_dir: Path) -> Path: ...


WRITERS: Registry[ReportWriter] = Registry("report format")

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def inline_spans(text: str) -> list[tuple[str, str]]:
    """Split text into ('text'|'code'|'bold', s) spans; writers render each their own way."""
    spans: list[tuple[str, str]] = []
    for i, part in enumerate(_CODE.split(text)):
        if i % 2:
            spans.append(("code", part))
            continue
        for j, sub in enumerate(_BOLD.split(part)):
            if sub:
                spans.append(("bold" if j % 2 else "text", sub))
    return spans
