"""What a comparison is asked (Options) and what it answers per metric (Row)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Options:
    threshold_pct: float = 5.0
    max_error_pp: float = 1.0
    confidence: float = 0.95
    bootstrap: int = 2000
    seed: int = 0
    force: bool = False
    #: also judge these request classes on their own ("*" = every class of the baseline)
    classes: tuple[str, ...] = ()


@dataclass
class Row:
    key: str
    label: str
    unit: str
    better: str
    baseline: float | None
    candidate: float | None
    change: float | None  # percent, or points for shares
    change_unit: str  # "%" | "pp"
    worse_by: float | None  # change signed so that positive = worse
    interval: tuple[float, float] | None  # 95% interval of `change` from the bootstrap (time blocks / slices)
    tests: list[str]
    beyond_noise: bool | None  # None: no noise estimate was possible
    verdict: str  # ok | REGRESSION | improved | within noise | too few samples | n/a
    #: two-sided bootstrap p-value of "no difference", and the same after Holm's step-down over
    #: every metric of the comparison that has one (the family-wise false-alarm control)
    p_value: float | None = None
    p_adjusted: float | None = None

    @property
    def decided(self) -> bool:
        """Beyond noise in either direction (a regression or an improvement)."""
        return self.verdict in ("REGRESSION", "improved")

    @property
    def direction(self) -> str:
        """'better' | 'worse' | 'same' as this row's verdict reads (same: not beyond noise or threshold)."""
        return {"improved": "better", "REGRESSION": "worse"}.get(self.verdict, "same")
