"""Markdown writer: `report.md` plus the figures as PNG files in `report_files/`.

Markdown cannot embed images portably, so the PNGs sit beside the report (GitHub and most
viewers show them); report.html is the single self-contained file.
"""

from __future__ import annotations

from pathlib import Path

from harness.report.document import Bullets, Callout, Document, Figure, Heading, Paragraph, Table
from harness.report.writers.base import WRITERS

FIGURE_DIR = "report_files"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table_md(table: Table) -> list[str]:
    align = table.alignment()
    lines = ["| " + " | ".join(_cell(c) for c in table.columns) + " |"]
    lines.append("|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|")
    for row in table.rows:
        cells = list(row) + [""] * (len(table.columns) - len(row))
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def render(doc: Document, figure_dir: str | None = FIGURE_DIR) -> str:
    """The Markdown text; figures link to `figure_dir/<name>.png` (None: leave them out)."""
    out: list[str] = [f"# {doc.title}", ""]
    if doc.subtitle:
        out += [doc.subtitle, ""]
    for block in doc.blocks:
        if isinstance(block, Heading):
            out += ["#" * max(2, min(6, block.level)) + " " + block.text, ""]
        elif isinstance(block, Paragraph):
            out += [block.text, ""]
        elif isinstance(block, Bullets):
            out += [f"- {i}" for i in block.items] + [""]
        elif isinstance(block, Callout):
            icon = {"warning": "⚠️", "note": "ℹ️", "ok": "✅"}[block.kind]
            out.append(f"> {icon} **{block.title}**")
            if block.items:
                out.append(">")
                out += [f"> - {item}" for item in block.items]
            out.append("")
        elif isinstance(block, Table):
            if block.caption:
                out += [f"**{block.caption}**", ""]
            out += table_md(block)
            out += [""] + [f"<sub>{n}</sub>  " for n in block.notes] + ([""] if block.notes else [])
        elif isinstance(block, Figure):
            if figure_dir is None:
                continue
            out += [f"**{block.title}**", "", f"![{block.title}]({figure_dir}/{block.name}.png)", ""]
            if block.caption:
                out += [f"<sub>{block.caption}</sub>", ""]
    return "\n".join(out).rstrip() + "\n"


class MarkdownWriter:
    name = "md"
    filename = "report.md"

    def write(self, doc: Document, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        figs = [b for b in doc.blocks if isinstance(b, Figure)]
        if figs:
            fig_dir = out_dir / FIGURE_DIR
            fig_dir.mkdir(exist_ok=True)
            for fig in figs:
                (fig_dir / f"{fig.name}.png").write_bytes(fig.png())
        path = out_dir / self.filename
        path.write_text(render(doc))
        return path


WRITERS.add("md", MarkdownWriter())
