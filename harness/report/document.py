"""A report as a list of blocks, independent of the output format.

Builders (harness.report.build) produce a Document; writers (harness.report.writers) render
it as Markdown, HTML, ... Text may use two inline marks, `code` and **bold**, which every
writer understands.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    """A plain list (no box): one item per line in every format."""

    items: list[str]


@dataclass
class Callout:
    """A box of lines: warnings at the top of a report, or a note."""

    title: str
    items: list[str]
    kind: Literal["warning", "note", "ok"] = "warning"


Align = Literal["l", "r"]


def right(n: int) -> list[Align]:
    """`n` right-aligned columns (the numbers)."""
    return ["r"] * n


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    align: list[Align] | None = None  # default: first column left, the rest right
    notes: list[str] = field(default_factory=list)  # footnotes under the table

    def alignment(self) -> list[str]:
        if self.align:
            return list(self.align)
        return ["l"] + ["r"] * (len(self.columns) - 1)


@dataclass
class Figure:
    """A matplotlib figure; rendered to PNG once, on first use.

    `figure` is a matplotlib.figure.Figure (kept as Any so this module never imports matplotlib).
    Tests inspect it (axes, line labels) before any writer renders it.
    """

    name: str  # file stem: report_files/<name>.png
    title: str
    caption: str
    figure: Any
    _png: bytes | None = field(default=None, repr=False)

    def png(self) -> bytes:
        if self._png is None:
            buf = io.BytesIO()
            self.figure.savefig(buf, format="png", dpi=100)
            self._png = buf.getvalue()
        return self._png


Block = Heading | Paragraph | Bullets | Callout | Table | Figure


@dataclass
class Document:
    title: str
    subtitle: str = ""
    blocks: list[Block] = field(default_factory=list)
    kind: Literal["run", "sweep"] = "run"

    def add(self, *blocks: Block) -> Document:
        self.blocks.extend(blocks)
        return self

    @property
    def figures(self) -> dict[str, Figure]:
        return {b.name: b for b in self.blocks if isinstance(b, Figure)}

    @property
    def tables(self) -> list[Table]:
        return [b for b in self.blocks if isinstance(b, Table)]

    @property
    def callouts(self) -> list[Callout]:
        return [b for b in self.blocks if isinstance(b, Callout)]
