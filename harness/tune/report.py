"""DIR/report.html of a tune: the decision log on top, then one section per step with its
candidates (a goodput bar per candidate, the table of what was measured) and a link to the
step's own sweep report, where every cell's plots are."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from harness.results.models.tune import Tried, TuneDoc
from harness.results.read import load_tune
from harness.sweep.flags import describe

_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
td.l,th.l{text-align:left}.changed{color:#0a6}.kept{color:#333}.skipped{color:#888}.failed{color:#c00}
code{background:#f4f4f4;padding:1px 4px}section{margin-top:2em;border-top:1px solid #ddd}"""

#: the table's figures: a Tried field (harness.results.models.tune), its heading, its format
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("goodput_req_per_s", "goodput req/s", ".2f"),
    ("req_per_s", "req/s", ".2f"),
    ("ttft_p50_ms", "TTFT p50", ".0f"),
    ("ttft_p99_ms", "TTFT p99", ".0f"),
    ("itl_p50_ms", "ITL p50", ".1f"),
    ("itl_p99_ms", "ITL p99", ".1f"),
    ("kv_usage_max", "KV max", ".2f"),
    ("preemptions", "preempt", ".0f"),
    ("prefix_hit_rate", "prefix hits", ".2f"),
    ("spec_acceptance_rate", "spec accept", ".2f"),
)


def _f(v: Any, spec: str) -> str:
    return "-" if not isinstance(v, (int, float)) else f"{v:{spec}}"


def _e(s: Any) -> str:
    return html.escape(str(s))


def _bars(tried: list[Tried]) -> str:
    vals = [t.goodput_req_per_s or 0.0 for t in tried]
    top = max(vals) if vals and max(vals) > 0 else 1.0
    rows = []
    for i, (t, v) in enumerate(zip(tried, vals, strict=True)):
        w = 360 * v / top
        rows.append(
            f'<text x="0" y="{i * 22 + 15}" font-size="12">{_e(t.config_id)[:40]}</text>'
            f'<rect x="260" y="{i * 22 + 3}" width="{w:.1f}" height="16" fill="#4a8"/>'
            f'<text x="{265 + w:.1f}" y="{i * 22 + 15}" font-size="12">{v:.2f}</text>'
        )
    return f'<svg width="700" height="{len(tried) * 22 + 4}" role="img" aria-label="goodput per candidate">{"".join(rows)}</svg>'


def render(doc: TuneDoc, out_dir: Path) -> str:
    cost = doc.cost
    parts = [
        f"<!doctype html><meta charset=utf-8><title>tune {_e(doc.name)}</title><style>{_CSS}</style>",
        f"<h1>harness tune {_e(doc.name)}</h1>",
        f"<p>status {_e(doc.status)} · expected load {_e(doc.expected_load)} · cost: "
        f"{cost.engine_starts} engine starts, {cost.measured_s / 60:.1f} measured min, "
        f"{cost.engine_s / 60:.1f} engine min, {cost.wall_s / 60:.1f} wall min</p>",
        "<h2>Decision log</h2><table><tr><th class=l>step</th><th class=l>verdict</th><th class=l>reason</th></tr>",
    ]
    for s in doc.steps:
        parts.append(
            f"<tr><td class=l><a href='#{_e(s.step)}'>{_e(s.step)}</a></td>"
            f"<td class='l {_e(s.verdict)}'>{_e(s.verdict)}</td><td class=l>{_e(s.reason)}</td></tr>"
        )
    parts.append("</table>")
    fin = doc.final
    vs = fin.vs_baseline.verdict if fin.vs_baseline is not None else "not compared"
    parts.append(
        f"<h2>Recommended</h2><p>flags <code>{_e(describe(fin.flags) or '(engine defaults)')}</code> · vs baseline: "
        f"<b>{_e(vs)}</b></p><p><code>{_e(' '.join(fin.command))}</code></p>"
        "<p>Paste <code>recommended.yaml</code> as a sweep/tune <code>base</code> block.</p>"
    )
    for s in doc.steps:
        parts.append(
            f"<section id='{_e(s.step)}'><h2>{_e(s.step)}: <span class='{_e(s.verdict)}'>{_e(s.verdict)}</span></h2>"
            f"<p>{_e(s.reason)}</p>"
        )
        tried = s.tried
        if tried:
            parts.append(_bars(tried))
            head = "".join(f"<th>{_e(c[1])}</th>" for c in COLUMNS)
            parts.append(
                f"<table><tr><th class=l>candidate</th><th class=l>status</th>{head}<th class=l>cells</th></tr>"
            )
            for t in tried:
                cells = ", ".join(t.cells)
                vals = "".join(f"<td>{_f(getattr(t, k), spec)}</td>" for k, _, spec in COLUMNS)
                parts.append(
                    f"<tr><td class=l>{_e(t.config_id)}</td><td class=l>{_e(t.status)}</td>{vals}<td class=l>{_e(cells)}</td></tr>"
                )
            parts.append("</table>")
            sweeps = sorted({t.sweep for t in tried if t.sweep})
            links = [
                f"<a href='steps/{_e(w)}/report.html'>{_e(w)}</a>"
                for w in sweeps
                if (out_dir / "steps" / w / "report.html").is_file()
            ]
            if links:
                parts.append(f"<p>plots and every cell: {' · '.join(links)}</p>")
        parts.append("</section>")
    return "\n".join(parts)


def write_tune_report(out_dir: Path) -> Path:
    doc = load_tune(out_dir)
    path = out_dir / "report.html"
    path.write_text(render(doc, out_dir))
    return path
