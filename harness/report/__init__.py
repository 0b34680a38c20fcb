"""Reports, comparisons and the regression gate.

    from harness.report import write_report
    write_report(run_or_sweep_dir)          # -> path of report.html (report.md beside it)

`harness run` and `harness sweep` call `write_report` at the end; `harness report DIR` calls it
by hand. Loading (data), the metric definitions (metrics), tables, figures, the document model
and one writer per format (writers) are separate modules; `compare` and `baseline` hold the
gate and the baseline store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.report.document import Document

DEFAULT_FORMATS = ("md", "html")


def build_document(path: Path | str) -> Document:
    """Load a run or sweep directory and build its report Document (nothing written)."""
    from harness.errors import UserError
    from harness.report.build import build_run_report, build_sweep_report
    from harness.report.data import kind_of, load_run
    from harness.report.sweep_data import load_sweep

    p = Path(path)
    if not p.is_dir():
        raise UserError(f"{p}: no such directory; pass a run directory or a sweep directory")
    if (p / "startup.json").is_file():  # a `harness startup` directory
        from harness.report.startup_view import build_startup_report

        return build_startup_report(p)
    kind = kind_of(p)
    if kind == "sweep":
        return build_sweep_report(load_sweep(p, requests=None))  # reports read no per-request records
    if kind == "run":
        return build_run_report(load_run(p, requests=None))
    raise UserError(
        f"{p}: neither a run directory (summary.json, requests.jsonl, ...) nor a sweep directory (index.json)"
    )


def write_report(path: Path | str, out: Path | str | None = None, formats: Sequence[str] = DEFAULT_FORMATS) -> Path:
    """Write report.md / report.html for a run or sweep directory into `out` (default: the
    directory itself). Returns the path of report.html, or of the first file written."""
    from harness.report.writers import WRITERS

    doc = build_document(path)
    out_dir = Path(out) if out is not None else Path(path)
    writers = [WRITERS.get(f) for f in formats]
    written = [w.write(doc, out_dir) for w in writers]
    _close(doc)
    for p in written:
        if p.name == "report.html":
            return p
    return written[0]


def write_report_or_say(
    write: Callable[[Path], Path],
    out: Path,
    say: Callable[[str], None],
    *,
    done: str = "report: {path}",
    failed: str = "report not written: {error}",
) -> Path | None:
    """Write the report at the end of a sweep, startup plan or tune without risking what it
    measured: a failure is one line through `say`, never raised (the results stand without it)."""
    try:
        path = write(out)
        say(done.format(path=path))
        return path
    except Exception as exc:  # the measurements are already stored
        say(failed.format(error=f"{type(exc).__name__}: {exc}"))
        return None


def _close(doc: Document) -> None:
    """Drop the figures' canvases: long sweeps write many reports in one process."""
    for fig in doc.figures.values():
        fig.figure.clear()


__all__ = ["DEFAULT_FORMATS", "build_document", "write_report", "write_report_or_say"]
