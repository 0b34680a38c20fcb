"""Number formatting shared by the report writers (the metric definitions: harness.compare.metrics)."""

from __future__ import annotations


# ---------------------------------------------------------------- formatting
def fmt_num(value: float | None, digits: int | None = None) -> str:
    """Three significant figures, thousands separated; '—' for missing."""
    if value is None:
        return "—"
    v = float(value)
    if digits is None:
        a = abs(v)
        digits = 0 if a >= 100 else 1 if a >= 10 else 2 if a >= 1 else 3
        if a == 0:
            digits = 0
    return f"{v:,.{digits}f}"


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f} %"


def fmt_signed_pct(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:+.1f} %"


def fmt_bytes_gib(value: float | None) -> str:
    return "—" if value is None else f"{value / 2**30:,.1f} GiB"
