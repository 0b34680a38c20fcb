"""Durations as Locust writes them (`30s`, `5m`, `1h30m`) in scenario and sweep files."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import UserError
from harness.scenario.durations import parse_duration
from harness.scenario.loader import load_scenario


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("30", 30.0),
        ("2.5", 2.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1h", 3600.0),
        ("500ms", 0.5),
        ("1m30s", 90.0),
        ("1h 30m", 5400.0),
        (" 2M ", 120.0),
        (12, 12.0),
    ],
)
def test_parse_duration(text, seconds) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "m", "1h30", "ten", "5 m s", "1e999s"])
def test_bad_durations_name_the_spellings(text) -> None:
    with pytest.raises(ValueError, match="30s, 5m, 1h30m"):
        parse_duration(text)


SCENARIO = """\
name: d
load: {{concurrency: 2, {load}}}
warmup: {{{warmup}}}
workload:
  classes: [{{name: a, input_tokens: 4, output_tokens: 2}}]
"""


def _write(tmp_path: Path, load: str, warmup: str = "duration_s: 0") -> Path:
    path = tmp_path / "d.yaml"
    path.write_text(SCENARIO.format(load=load, warmup=warmup))
    return path


def test_scenario_file_takes_locust_durations(tmp_path: Path) -> None:
    s = load_scenario(_write(tmp_path, "duration_s: 5m, ramp_s: 10s", "duration: 1m30s"))
    assert s.load.duration_s == 300.0 and s.load.ramp_s == 10.0 and s.warmup.duration_s == 90.0
    s = load_scenario(_write(tmp_path, "duration: 1h30m"))
    assert s.load.duration_s == 5400.0


def test_bad_duration_in_a_file_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "duration_s: 5 minutes")
    with pytest.raises(UserError) as exc:
        load_scenario(path)
    assert exc.value.lines == [
        f"{path}: load.duration_s: '5 minutes' is not a duration; "
        "write seconds (30, 2.5) or a duration like 30s, 5m, 1h30m, 500ms"
    ]
    with pytest.raises(UserError, match="duration and duration_s are the same setting"):
        load_scenario(_write(tmp_path, "duration: 5s, duration_s: 5"))


def test_sweep_file_takes_durations(tmp_path: Path) -> None:
    from harness.sweep.models import SweepFile

    sweep = SweepFile.model_validate(
        {
            "name": "s",
            "engine": {"kind": "sim", "ready_timeout_s": "2m"},
            "scenarios": ["x.yaml"],
            "warmup": {"duration": "30s"},
            "overrides": {"load.duration_s": "1m"},
        }
    )
    assert sweep.engine.ready_timeout_s == 120.0 and sweep.warmup is not None and sweep.warmup.duration_s == 30.0
