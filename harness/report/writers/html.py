"""HTML writer: one self-contained `report.html` (CSS inline, figures as base64 PNG data URIs)
that opens from disk with no network and no other file."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from harness.report.document import Bullets, Callout, Document, Figure, Heading, Paragraph, Table
from harness.report.writers.base import WRITERS, inline_spans

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#1b1f24;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
.subtitle{color:#57606a;margin-top:0}
.tablewrap{max-width:100%;overflow-x:auto;margin:.6em 0 1.2em}
table{border-collapse:collapse;font-size:.92em}
td.l{overflow-wrap:break-word}
th,td{border:1px solid #d0d7de;padding:.3em .6em}th{background:#f6f8fa}
td.r,th.r{text-align:right;font-variant-numeric:tabular-nums}td.l,th.l{text-align:left}
tr:nth-child(even) td{background:#fbfcfd}
caption{caption-side:top;text-align:left;font-weight:600;padding-bottom:.3em}
.callout{border-left:4px solid;padding:.5em 1em;margin:1em 0;border-radius:3px}
.callout.warning{border-color:#bf8700;background:#fff8c5}.callout.note{border-color:#0969da;background:#ddf4ff}
.callout.ok{border-color:#1a7f37;background:#dafbe1}.callout ul{margin:.3em 0 0;padding-left:1.3em}
figure{margin:1em 0 2em}figure img{max-width:100%;border:1px solid #eaeef2}
figcaption{color:#57606a;font-size:.9em}.fignote{font-weight:600}
.tnote{color:#57606a;font-size:.85em;margin:-.8em 0 1em}
code{background:#f6f8fa;padding:.1em .3em;border-radius:3px;font-size:.9em}
"""


def inline(text: str) -> str:
    parts = []
    for kind, s in inline_spans(str(text)):
        esc = html.escape(s)
        parts.append(f"<code>{esc}</code>" if kind == "code" else f"<strong>{esc}</strong>" if kind == "bold" else esc)
    return "".join(parts)


def render(doc: Document) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(doc.title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{inline(doc.title)}</h1>",
    ]
    if doc.subtitle:
        out.append(f'<p class="subtitle">{inline(doc.subtitle)}</p>')
    for block in doc.blocks:
        if isinstance(block, Heading):
            level = max(2, min(6, block.level))
            out.append(f"<h{level}>{inline(block.text)}</h{level}>")
        elif isinstance(block, Paragraph):
            out.append(f"<p>{inline(block.text)}</p>")
        elif isinstance(block, Bullets):
            out.append("<ul>" + "".join(f"<li>{inline(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Callout):
            items = "".join(f"<li>{inline(i)}</li>" for i in block.items)
            out.append(
                f'<div class="callout {block.kind}"><strong>{inline(block.title)}</strong>'
                + (f"<ul>{items}</ul>" if items else "")
                + "</div>"
            )
        elif isinstance(block, Table):
            align = block.alignment()
            # wide tables (a sweep's cells: flags, load, a dozen figures) scroll inside their own box
            # instead of widening the page past the text (audit D12)
            rows = ['<div class="tablewrap"><table>']
            if block.caption:
                rows.append(f"<caption>{inline(block.caption)}</caption>")
            rows.append(
                "<thead><tr>"
                + "".join(f'<th class="{a}">{inline(c)}</th>' for c, a in zip(block.columns, align, strict=False))
                + "</tr></thead><tbody>"
            )
            for row in block.rows:
                cells = list(row) + [""] * (len(block.columns) - len(row))
                rows.append(
                    "<tr>"
                    + "".join(f'<td class="{a}">{inline(c)}</td>' for c, a in zip(cells, align, strict=False))
                    + "</tr>"
                )
            rows.append("</tbody></table></div>")
            out.append("".join(rows))
            for note in block.notes:
                out.append(f'<p class="tnote">{inline(note)}</p>')
        elif isinstance(block, Figure):
            data = base64.b64encode(block.png()).decode("ascii")
            out.append(
                f'<figure id="{html.escape(block.name)}"><img alt="{html.escape(block.title)}" src="data:image/png;base64,{data}">'
                f'<figcaption><span class="fignote">{inline(block.title)}.</span> {inline(block.caption)}</figcaption></figure>'
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


class HtmlWriter:
    name = "html"
    filename = "report.html"

    def write(self, doc: Document, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / self.filename
        path.write_text(render(doc))
        return path


WRITERS.add("html", HtmlWriter())
