"""Rendering a comparison: text for the terminal, markdown for reports and CI summaries."""

from __future__ import annotations

from harness.report.compare_model import Pair, Result, Row
from harness.report.metrics import fmt_num

# ---------------------------------------------------------------- rendering


def _fmt_val(v: float | None, unit: str) -> str:
    return fmt_num(v)


def _fmt_change(r: Row) -> str:
    if r.change is None:
        return "—"
    return f"{r.change:+.1f} {r.change_unit}"


def _fmt_interval(r: Row) -> str:
    if r.interval is None:
        return "—"
    return f"[{r.interval[0]:+.1f}, {r.interval[1]:+.1f}]"


def _table_rows(p: Pair) -> list[list[str]]:
    return [
        [
            f"{r.label} ({r.unit})",
            _fmt_val(r.baseline, r.unit),
            _fmt_val(r.candidate, r.unit),
            _fmt_change(r),
            _fmt_interval(r),
            r.verdict,
        ]
        for r in p.rows
    ]


HEADERS = ["metric", "baseline", "candidate", "change", "95% interval", "verdict"]


def render_text(res: Result, verbose: bool = False) -> str:
    out = [
        f"baseline : {res.baseline}",
        f"candidate: {res.candidate}",
        f"threshold: worse by more than {res.options.threshold_pct:g}% (shares such as failed requests: {res.options.max_error_pp:g} percentage point(s)), and beyond noise",
    ]
    for w in res.warnings:
        out.append(f"warning  : {w}")
    for p in res.pairs:
        out.append("")
        if p.label:
            out.append(f"== {p.label}: {p.status}" + (f" ({p.note})" if p.note else ""))
        if p.status != "compared":
            continue
        out.append(f"workload : {p.fingerprint}")
        headers = list(HEADERS)
        headers[4] = f"{int(res.options.confidence * 100)}% interval"
        rows = [headers, *_table_rows(p)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
        for j, row in enumerate(rows):
            out.append(
                "  ".join(
                    cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) if i < 5 else cell
                    for i, cell in enumerate(row)
                ).rstrip()
            )
            if j == 0:
                out.append("  ".join("-" * w for w in widths))
        if verbose or any(r.verdict not in ("ok", "n/a") for r in p.rows):
            for r in p.rows:
                if verbose or r.verdict not in ("ok", "n/a"):
                    out.append(f"  {r.label}: {r.verdict}; " + "; ".join(r.tests))
    for q in res.quality:
        out.append("")
        out += q.lines()
    out.append("")
    out.append("How this was decided:")
    out += [f"  - {h}" for h in res.how]
    if res.quality:
        out.append(
            "  - quality: the candidate's greedy outputs scored against the baseline's by the quality block's gate (exit 1 when it fails)"
        )
    out.append("")
    out.append(f"{res.verdict_line()} (exit {res.exit_code})")
    return "\n".join(out) + "\n"


def render_markdown(res: Result, heading_level: int = 3) -> str:
    h = "#" * heading_level
    icon = "✅" if res.exit_code == 0 else "❌"
    out = [
        f"{h} {icon} Comparison with the baseline",
        "",
        f"**{res.verdict_line()}**",
        "",
        f"- baseline: `{res.baseline}`",
        f"- candidate: `{res.candidate}`",
        f"- threshold: worse by more than {res.options.threshold_pct:g}% (shares such as failed requests: {res.options.max_error_pp:g} percentage point(s)), and beyond noise",
        "",
    ]
    for w in res.warnings:
        out.append(f"> ⚠️ {w}")
    if res.warnings:
        out.append("")
    mark = {
        "REGRESSION": "❌ REGRESSION",
        "improved": "🟢 improved",
        "within noise": "〰️ within noise",
        "too few samples": "❔ too few samples",
        "ok": "ok",
        "n/a": "n/a",
    }
    cells = [p for p in res.pairs if p.label]
    if cells:
        out += ["| cell | status | verdict | changes beyond the threshold |", "|:---|:---|:---|:---|"]
        for p in cells:
            moved = [f"{r.label} {_fmt_change(r)} ({r.verdict})" for r in p.rows if r.verdict not in ("ok", "n/a")]
            verdict = (
                "❌ failed"
                if p.failed
                else "❌ regression"
                if p.regressions
                else "✅"
                if p.status == "compared"
                else "—"
            )
            status = p.status + (f": {p.note}" if p.note and p.status != "compared" else "")
            out.append(f"| {p.label} | {status.replace('|', '/')} | {verdict} | {'; '.join(moved) or '—'} |")
        out += ["", "<details><summary>Per-cell tables</summary>", ""]
    for p in res.pairs:
        if p.status != "compared":
            continue
        if p.label:
            out += [f"**{p.label}**", ""]
        out.append(f"_{p.fingerprint}_")
        out.append("")
        out.append("| " + " | ".join(HEADERS) + " |")
        out.append("|:---|---:|---:|---:|---:|:---|")
        for row, r in zip(_table_rows(p), p.rows, strict=True):
            row[-1] = mark.get(r.verdict, r.verdict)
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
        out.append("")
    if cells:
        out += ["</details>", ""]
    for q in res.quality:
        out += ["```", *q.lines(), "```", ""]
    out += ["<details><summary>How this was decided</summary>", ""] + [f"- {x}" for x in res.how]
    details = [
        f"- {p.label + ': ' if p.label else ''}{r.label}: {'; '.join(r.tests)}"
        for p in res.pairs
        for r in p.rows
        if r.verdict != "ok"
    ]
    if details:
        out += ["", "Noise tests of the metrics that moved:", "", *details]
    out += ["", "</details>", ""]
    return "\n".join(out)
