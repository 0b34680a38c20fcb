"""What steps read and change: the current best flags, the baseline, the measurements, the budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.engines import get_kind
from harness.engines.parts.flags import Knob
from harness.tune.ledger import Ledger
from harness.tune.load import TuneSpec
from harness.tune.measure import Measurement, Measurer, flags_key
from harness.tune.models import STEP_NAMES, TuneFile

if TYPE_CHECKING:
    from harness.tune.steps.base import StepResult


@dataclass
class TuneContext:
    spec: TuneSpec
    measurer: Measurer
    ledger: Ledger
    current: dict[str, Any]
    baseline: Measurement | None = None
    results: list[Any] = field(default_factory=list)
    #: steps still to come, so a step can keep starts for the final run
    remaining: list[str] = field(default_factory=list)

    #: set by the final step: its measurement and its comparison with the baseline (tune.json)
    final: Measurement | None = None
    vs_baseline: dict[str, Any] | None = None

    @property
    def tune(self) -> TuneFile:
        return self.spec.file

    @property
    def threshold_pct(self) -> float:
        return self.spec.file.measure.threshold_pct

    def candidates(self, flag: str) -> list[Any] | None:
        from harness.sweep.flags import flag_key

        for k, v in self.spec.file.candidates.items():
            if flag_key(k) == flag_key(flag):
                return list(v)
        return None

    def knob(self, vllm_flag: str) -> Knob:
        """This engine kind's flag for the guide's (vLLM's) flag name; `flag` None when it has none."""
        return get_kind(self.spec.file.engine.kind).flags.knob(vllm_flag)

    def knob_of(self, flag: str) -> Knob:
        """The knob of this engine kind whose flag is `flag` (its spelling): how a value becomes flags."""
        return get_kind(self.spec.file.engine.kind).flags.knob_of(flag)

    def change(self, flag: str, value: Any) -> dict[str, Any]:
        """The flags that set this kind's `flag` (its spelling) to `value` against the current best:
        one flag, or several for a knob the kind spreads over more (llama.cpp's K and V cache types,
        SGLang's speculative algorithm and draft model)."""
        return self.knob_of(flag).change(value, self.current)

    def lacks(self, step: str, vllm_flag: str) -> StepResult | None:
        """A skipped StepResult when this engine kind has no equivalent of `vllm_flag`, else None."""
        from harness.tune.steps.base import StepResult

        k = self.knob(vllm_flag)
        if k.flag is not None:
            return None
        kind = self.spec.file.engine.kind
        return StepResult(
            step,
            "skipped",
            f"engine kind {kind} has no equivalent of --{vllm_flag}: {k.why_missing}.",
            dict(self.current),
        )

    def step_dir(self, step: str, suffix: str = "") -> str:
        return f"{STEP_NAMES.index(step) + 1:02d}-{step}{suffix}"

    def measure(
        self, step: str, sets: list[dict[str, Any]], suffix: str = "", fresh: bool = False
    ) -> list[Measurement] | None:
        """Measure flag sets (reusing earlier measurements unless `fresh`); None when the budget
        does not allow the new starts (keeping one for the final run)."""
        new = len({flags_key(s) for s in sets}) if fresh else self.measurer.new_starts(sets)
        reserve = 1 if step != "final" and "final" in self.remaining else 0
        if new and self.ledger.exhausted(new, reserve):
            self._budget_reason = self.ledger.exhausted(new, reserve)
            return None
        if fresh:
            return self.measurer.measure_fresh(self.step_dir(step, suffix), sets, step)
        return self.measurer.measure(self.step_dir(step, suffix), sets, step)

    def measure_more(self, step: str, ms: list[Measurement], tag: str) -> bool:
        """Another interleaved repeat of every measurement in `ms` (one start each, in this order),
        added to them. False, with nothing started, when the budget does not allow the starts
        (keeping one for the final run)."""
        reserve = 1 if step != "final" and "final" in self.remaining else 0
        where = self.step_dir(step, f"-more-{tag}")
        new = self.measurer.pending_starts(where, [m.flags for m in ms])
        why = self.ledger.exhausted(new, reserve) if new else None
        if why:
            self._budget_reason = why
            return False
        self.measurer.measure_more(where, ms, step)
        return True

    def budget_skip(self, step: str) -> StepResult:
        from harness.tune.steps.base import StepResult

        return StepResult(step, "skipped", getattr(self, "_budget_reason", "budget spent"), dict(self.current))

    def incumbent(self) -> Measurement | None:
        return self.measurer.cache.get(flags_key(self.current))
