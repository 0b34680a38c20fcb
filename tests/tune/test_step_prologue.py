"""steps.base.prologue: the checks most tune steps make first, in the step's own order."""

from __future__ import annotations

from types import SimpleNamespace

from harness.tune.steps.base import NO_MEASUREMENT, StepResult, prologue


class Ctx:
    def __init__(self, has_flag: bool, inc: object) -> None:
        self.current = {"max-num-seqs": 8}
        self._has_flag, self._inc = has_flag, inc

    def lacks(self, step: str, flag: str) -> StepResult | None:
        return None if self._has_flag else StepResult(step, "skipped", f"no --{flag}", dict(self.current))

    def incumbent(self) -> object:
        return self._inc


GOOD, BAD = SimpleNamespace(ok=True), SimpleNamespace(ok=False)


def test_both_checks_pass_gives_the_incumbent() -> None:
    assert prologue(Ctx(True, GOOD), "s", "max-num-seqs") == (None, GOOD)


def test_each_check_alone() -> None:
    done, inc = prologue(Ctx(False, GOOD), "s", "max-num-seqs")
    assert inc is None and done.reason == "no --max-num-seqs"
    for missing in (None, BAD):
        done, inc = prologue(Ctx(True, missing), "s", "max-num-seqs", missing="no baseline")
        assert inc is None and (done.verdict, done.reason, done.chosen) == (
            "skipped",
            "no baseline",
            {"max-num-seqs": 8},
        )


def test_order_decides_which_reason_when_both_fail() -> None:
    assert prologue(Ctx(False, None), "s", "f")[0].reason == "no --f"  # the flag first (most steps)
    assert prologue(Ctx(False, None), "s", "f", incumbent_first=True)[0].reason == NO_MEASUREMENT
