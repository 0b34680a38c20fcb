"""Report writers, one module per format, registered by name (`md`, `html`).

A writer turns a Document into one file in an output directory. Add a format by adding a
module that registers a `ReportWriter` in `WRITERS` and importing it below.
"""

from __future__ import annotations

from harness.report.writers import html, markdown  # each registers its format on import ("html", "md")
from harness.report.writers.base import WRITERS, ReportWriter

__all__ = ["WRITERS", "ReportWriter", "html", "markdown"]
