"""For tests whose assertion rests on the simulated engine's timing: read its lag, retry once, and
fail for the right reason.

The simulator measures how far it fell behind its own schedule (harness/sim/engine.py); a run
where it did carries a validity warning that starts with LAG_PREFIX, and the figures in
`summary.json` `engine.simulator`. A timing assertion that fails while the simulator was behind
says nothing about the code under test (the host did not give the simulator the CPU): such a test
is run once more, and if it fails again with the simulator behind, it fails with the lag figure
("simulator fell behind by ...") instead of flipping silently. A failure with the simulator on
schedule is a real failure and is raised at once.

    from simlag import retry_on_sim_lag

    def test_x(tmp_path):
        def attempt(out: Path) -> None:
            ... run the sweep/run into `out`, assert on its timings ...
        retry_on_sim_lag(attempt, tmp_path)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

#: the validity warning harness.results.build writes when the simulated engine fell behind
LAG_PREFIX = "the simulated engine fell behind"


def lag_warnings(summary: dict[str, Any]) -> list[str]:
    """The simulated-engine lag warnings of one summary.json (empty when it kept its schedule)."""
    validity = summary.get("validity") or {}
    return [w for w in validity.get("warnings") or [] if isinstance(w, str) and w.startswith(LAG_PREFIX)]


def lag_under(root: Path) -> list[str]:
    """'<run dir>: <warning>' for every summary.json under `root` whose simulator fell behind."""
    out: list[str] = []
    if not root.exists():
        return out
    for path in sorted(root.rglob("summary.json")):
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(summary, dict):
            continue
        for w in lag_warnings(summary):
            out.append(f"{path.parent.relative_to(root) if path.parent != root else '.'}: {w}")
    return out


def retry_on_sim_lag(attempt: Callable[[Path], Any], tmp_path: Path, *, retries: int = 1) -> Any:
    """Run `attempt(out_dir)`; when it fails an assertion while a simulated engine under `out_dir`
    fell behind, run it again in a fresh directory (`retries` times); when it still fails so,
    fail with the lag figures. Returns what the passing attempt returned."""
    for i in range(retries + 1):
        out = tmp_path / f"attempt-{i + 1}"
        try:
            return attempt(out)
        except AssertionError as exc:
            lagged = lag_under(out)
            if not lagged:
                raise
            if i < retries:
                print(f"\nsimulator fell behind on attempt {i + 1}; retrying once:\n  " + "\n  ".join(lagged[:4]))
                continue
            pytest.fail(
                f"simulator fell behind in all {retries + 1} attempts, so its timings are the host's, not "
                f"the model's ({len(lagged)} run(s)):\n  "
                + "\n  ".join(lagged[:6])
                + f"\nthe assertion that failed: {exc}",
                pytrace=False,
            )
    raise AssertionError("unreachable")


def assert_sim_on_schedule(root: Path) -> None:
    """Fail, with the figure, when any simulated engine under `root` fell behind its schedule."""
    lagged = lag_under(root)
    assert not lagged, "simulator fell behind:\n  " + "\n  ".join(lagged[:6])


# --------------------------------------------------------------- a simulator a test talks to directly
#: a step this late moves inter-token gaps by tens of ms: a gap or ITL assertion then measures the
#: host, not the model
RAW_STEP_LAG_MAX_S = 0.05


def raw_sim_lag(metrics: dict[str, float]) -> str | None:
    """What a simulator's own /metrics say about its lag (the flat dict of tests/sim/conftest.py
    SimProc.metrics()): None when it kept its schedule, else the figures. The rule of
    harness.results.build (share of busy time lost, SIM_BEHIND_SHARE and SIM_BEHIND_MIN_S) or one
    step later than RAW_STEP_LAG_MAX_S."""
    from harness.results.build import SIM_BEHIND_MIN_S, SIM_BEHIND_SHARE

    behind = metrics.get("sim_behind_seconds_total", 0.0)
    modelled = metrics.get("sim_modelled_seconds_total", 0.0)
    late = metrics.get("sim_step_lag_max_seconds", 0.0)
    share = behind / modelled if modelled > 0 else 0.0
    if (behind >= SIM_BEHIND_MIN_S and share >= SIM_BEHIND_SHARE) or late >= RAW_STEP_LAG_MAX_S:
        return f"behind by {behind:.2f} s ({100 * share:.0f}% of {modelled:.2f} s modelled), latest step {1000 * late:.0f} ms late"
    return None


def retry_while_lagging(attempt: Callable[[], Any], lag: Callable[[], str | None], *, retries: int = 1) -> Any:
    """Run `attempt()`; when it fails an assertion and `lag()` (read after the attempt, e.g. from the
    attempt's simulators) says the simulator fell behind, run it again (`retries` times), then fail
    with the lag figure. A failure with the simulator on schedule is raised at once."""
    for i in range(retries + 1):
        try:
            return attempt()
        except AssertionError as exc:
            why = lag()
            if not why:
                raise
            if i < retries:
                print(f"\nsimulator fell behind on attempt {i + 1} ({why}); retrying once")
                continue
            pytest.fail(
                f"simulator fell behind in all {retries + 1} attempts, so its timings are the host's, not "
                f"the model's: {why}\nthe assertion that failed: {exc}",
                pytrace=False,
            )
    raise AssertionError("unreachable")


@contextmanager
def blame_sim_lag(root: Path) -> Iterator[None]:
    """For assertions on runs a module fixture made under `root` (no retry: the runs are shared):
    an assertion that fails while a simulated engine under `root` fell behind fails with the lag
    figure instead, so the failure names its cause; one that fails on schedule is raised as is."""
    try:
        yield
    except AssertionError as exc:
        lagged = lag_under(root)
        if not lagged:
            raise
        pytest.fail(
            "simulator fell behind, so its timings are the host's, not the model's:\n  "
            + "\n  ".join(lagged[:6])
            + f"\nthe assertion that failed: {exc}",
            pytrace=False,
        )
