"""Report writers, one module per format, registered by name (`md`, `html`).

A writer turns a Document into one file in an output directory. Add a format by adding a
module that registers a `ReportWriter` in `WRITERS` and importing it below.
"""

from __future__ import annotations

from harness.report.writers import html as _html  # noqa: F401  (registers "html")
from harness.report.writers import markdown as _markdown  # noqa: F401  (registers "md")
from harness.report.writers.base import WRITERS, ReportWriter

__all__ = ["WRITERS", "ReportWriter"]
