"""The tests' sim-lag helper (tests/simlag.py): a timing assertion that fails while the simulated
engine fell behind is retried once, then fails with the lag figure; any other failure is raised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from simlag import LAG_PREFIX, lag_under, retry_on_sim_lag

LAGGED = f"{LAG_PREFIX} its own schedule by 1.71 s (32% of its busy time, limit 5%): ..."


def _summary(out: Path, *warnings: str) -> None:
    (out / "cell").mkdir(parents=True)
    (out / "cell" / "summary.json").write_text(
        json.dumps({"validity": {"ok": not warnings, "warnings": list(warnings)}})
    )


def test_a_lagged_failure_is_retried_once_then_fails_with_the_figure(tmp_path: Path) -> None:
    tries: list[Path] = []

    def attempt(out: Path) -> None:
        tries.append(out)
        _summary(out, "host stalled 1 time(s)", LAGGED)
        raise AssertionError("E2E ratio 0.84")

    with pytest.raises(pytest.fail.Exception) as exc:
        retry_on_sim_lag(attempt, tmp_path)
    assert len(tries) == 2
    assert "simulator fell behind in all 2 attempts" in str(exc.value) and "by 1.71 s" in str(exc.value)
    assert "E2E ratio 0.84" in str(exc.value)


def test_a_failure_on_schedule_is_raised_at_once_and_a_pass_after_a_lag_counts(tmp_path: Path) -> None:
    def real_failure(out: Path) -> None:
        _summary(out, "host stalled 1 time(s)")
        raise AssertionError("a real bug")

    with pytest.raises(AssertionError, match="a real bug"):
        retry_on_sim_lag(real_failure, tmp_path / "a")
    assert not (tmp_path / "a" / "attempt-2").exists()

    def flaky(out: Path) -> str:
        _summary(out, LAGGED)
        assert out.name == "attempt-2"
        return "ok"

    assert retry_on_sim_lag(flaky, tmp_path / "b") == "ok"
    assert lag_under(tmp_path / "b") == [f"attempt-1/cell: {LAGGED}", f"attempt-2/cell: {LAGGED}"]
