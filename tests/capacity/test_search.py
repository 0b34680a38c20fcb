"""The capacity search's algorithm over a known boundary (no engine): bracket, bisect, monotone fit."""

from __future__ import annotations

import pytest

from harness.capacity.search import CapacityResult, Trial, classify, isotonic_decreasing, search_levels
from harness.errors import UserError


def boundary_at(capacity: float, noise: dict[float, float] | None = None):
    """Attainment 1.0 up to `capacity`, falling steeply above it (as queueing makes it)."""
    calls: list[float] = []

    def evaluate(level: float) -> Trial:
        calls.append(level)
        att = 1.0 if level <= capacity else max(0.0, 1.0 - 3 * (level - capacity) / capacity)
        if noise and level in noise:
            att = noise[level]
        return Trial(level=level, attainment=att)

    return evaluate, calls


@pytest.mark.parametrize("capacity,start", [(17.3, 1.0), (17.3, 200.0), (3.1, 4.0), (100.0, 100.0)])
def test_finds_a_known_boundary_within_its_precision(capacity: float, start: float) -> None:
    evaluate, calls = boundary_at(capacity)
    res = search_levels(evaluate, start=start, attainment=0.95, precision=0.05, max_trials=20)
    assert res.converged, res.stop_reason
    assert res.boundary is not None and res.first_failing is not None
    assert res.boundary <= capacity * (1 + 0.05 / 3 / 0.95) + 1e-9  # passes only up to where attainment >= 0.95
    assert res.first_failing > capacity
    assert (res.first_failing - res.boundary) / res.first_failing <= 0.05
    assert len(calls) == len(set(calls)) == len(res.trials)
    assert len(calls) <= 12


def test_concurrency_is_searched_in_integers_to_adjacent_levels() -> None:
    evaluate, calls = boundary_at(23)
    res = search_levels(evaluate, start=4, integer=True, knob="concurrency", precision=0.001)
    assert all(float(c).is_integer() for c in calls)
    assert res.boundary == 23 and res.first_failing == 24
    assert res.converged


def test_a_saturated_trial_counts_as_failing_whatever_it_measured() -> None:
    def evaluate(level: float) -> Trial:
        return Trial(level=level, attainment=1.0, saturated="over-saturated" if level > 10 else None)

    res = search_levels(evaluate, start=4, precision=0.05)
    assert res.boundary is not None and res.boundary <= 10 < (res.first_failing or 0)
    assert all(t.passed == (t.level <= 10) for t in res.trials)


def test_monotone_fit_keeps_passing_levels_contiguous() -> None:
    # a lucky trial above a failing one must not make the boundary jump past it
    trials = [Trial(level=lvl, attainment=a) for lvl, a in [(4, 1.0), (8, 0.90), (12, 0.97), (16, 0.2)]]
    lo, hi = classify(trials, 0.95)
    assert (lo, hi) == (4, 8)
    assert [t.passed for t in sorted(trials, key=lambda t: t.level)] == [True, False, False, False]
    assert isotonic_decreasing([1.0, 0.9, 0.97, 0.2]) == pytest.approx([1.0, 0.935, 0.935, 0.2])


def test_nothing_passes_and_budget_and_max_level() -> None:
    res = search_levels(lambda lvl: Trial(level=lvl, attainment=0.0), start=8, min_level=1)
    assert res.boundary is None and res.first_failing == 1 and "failed" in res.stop_reason
    res = search_levels(lambda lvl: Trial(level=lvl, attainment=1.0), start=8, max_level=50)
    assert res.boundary == 50 and res.first_failing is None and "highest level" in res.stop_reason
    evaluate, calls = boundary_at(17.3)
    res = search_levels(evaluate, start=1, max_trials=3)
    assert len(calls) == 3 and not res.converged and "budget" in res.stop_reason


def test_result_serializes_and_explains_itself() -> None:
    evaluate, _ = boundary_at(10)
    res = search_levels(evaluate, start=2)
    data = res.to_dict()
    assert data["boundary"] == res.boundary and data["relative_gap"] == res.relative_gap
    assert len(data["trials"]) == len(res.trials)
    text = "\n".join(res.lines())
    assert "capacity under the SLOs" in text and "uncertainty" in text
    assert isinstance(res, CapacityResult)


def test_bad_parameters_are_user_errors() -> None:
    with pytest.raises(UserError):
        search_levels(lambda lvl: Trial(level=lvl, attainment=1.0), start=0)


def test_results_not_monotone_in_load_are_re_measured_before_the_answer() -> None:
    """8 users kept 30% of requests within the SLOs where 6 kept 10% (a busy host, a warm cache):
    both levels are measured again before the answer; it says what was re-measured and whether
    the results agree now."""
    seen: dict[float, int] = {}

    def flaky(level: float) -> Trial:
        seen[level] = seen.get(level, 0) + 1
        if level == 8:
            return Trial(level=level, attainment=0.3 if seen[level] == 1 else 0.0)
        return Trial(level=level, attainment={4: 1.0, 5: 0.9, 6: 0.1, 7: 0.05}.get(level, 0.0))

    res = search_levels(flaky, start=4, integer=True, knob="concurrency", precision=0.001, max_trials=6)
    text = "\n".join(res.lines())
    assert seen[8] == 2 and any(t.remeasured for t in res.trials) and "(re-measured)" in text
    assert "not monotone in load" in res.monotone_note and "now monotone" in res.monotone_note, res.monotone_note
    assert res.boundary == 4

    def contradictory(level: float) -> Trial:
        return Trial(level=level, attainment={4: 1.0, 8: 0.5}.get(level, 0.0))

    res = search_levels(contradictory, start=4, integer=True, knob="concurrency", precision=0.001, max_trials=6)
    assert "NOT monotone" in res.monotone_note and "uncertain" in res.lines()[0]


def test_trial_warnings_are_listed_with_the_answer() -> None:
    def warned(level: float) -> Trial:
        return Trial(
            level=level,
            attainment=1.0 if level <= 10 else 0.2,
            warnings=["Prefix cache hit rate 25.0 % exceeds the 0 % this workload can produce"] if level == 8 else [],
        )

    res = search_levels(warned, start=8, precision=0.2)
    text = "\n".join(res.lines())
    assert "validity warnings" in text and "at 8 req/s: Prefix cache hit rate 25.0 %" in text
    assert res.to_dict()["trials"][0]["warnings"]
