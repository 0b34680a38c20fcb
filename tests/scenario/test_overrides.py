"""CLI overrides on a scenario file: one load mode replaces the other, stop conditions replace."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.cli.run import add_parser, overrides_from_args
from harness.errors import UserError
from harness.scenario import dump_scenario, load_scenario
from harness.scenario.loader import UNSET, apply_overrides

CLOSED = """\
name: o
seed: 5
load: {concurrency: 4, duration_s: 10}
warmup: {duration_s: 2}
workload:
  classes:
    - name: a
      input_tokens: 10
      output_tokens: 5
"""
OPEN = CLOSED.replace("concurrency: 4, duration_s: 10", "rate: 2.5, arrival: gamma, burstiness: 0.5, requests: 30")


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(["run", "x.yaml", *argv])


def _load(tmp_path: Path, text: str, *argv: str):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_scenario(path, overrides_from_args(_args(*argv)))


def test_no_overrides_keeps_the_file(tmp_path: Path) -> None:
    sc = _load(tmp_path, CLOSED)
    assert (sc.load.concurrency, sc.load.rate, sc.load.duration_s, sc.load.requests) == (4, None, 10, None)
    assert sc.seed == 5 and sc.warmup.duration_s == 2 and sc.target.url is None


def test_rate_replaces_concurrency(tmp_path: Path) -> None:
    sc = _load(tmp_path, CLOSED, "--rate", "7")
    assert sc.load.rate == 7.0 and sc.load.concurrency is None and sc.load.open_loop
    assert sc.load.duration_s == 10  # the stop condition is kept


def test_concurrency_replaces_rate(tmp_path: Path) -> None:
    sc = _load(tmp_path, OPEN, "--concurrency", "3")
    assert sc.load.concurrency == 3 and sc.load.rate is None and not sc.load.open_loop
    assert sc.load.requests == 30


def test_duration_replaces_requests_and_vice_versa(tmp_path: Path) -> None:
    sc = _load(tmp_path, OPEN, "--duration", "4")
    assert (sc.load.duration_s, sc.load.requests) == (4.0, None)
    sc = _load(tmp_path, CLOSED, "--requests", "12")
    assert (sc.load.duration_s, sc.load.requests) == (None, 12)
    sc = _load(tmp_path, CLOSED, "--requests", "12", "--duration", "3")
    assert (sc.load.duration_s, sc.load.requests) == (3.0, 12)


def test_target_seed_warmup_api_overrides(tmp_path: Path) -> None:
    sc = _load(
        tmp_path,
        CLOSED,
        "--target",
        "http://h:1",
        "--model",
        "m",
        "--api",
        "openai-completions",
        "--seed",
        "9",
        "--warmup",
        "0",
        "--no-telemetry",
    )
    assert sc.target.url == "http://h:1" and sc.target.model == "m" and sc.target.api == "openai-completions"
    assert sc.seed == 9 and sc.warmup.duration_s == 0 and sc.telemetry.enabled is False


def test_warmup_seconds_replace_the_files_warmup(tmp_path: Path) -> None:
    text = CLOSED.replace("warmup: {duration_s: 2}", "warmup: {duration_s: 2, requests: 8}")
    assert _load(tmp_path, text).warmup.requests == 8
    sc = _load(tmp_path, text, "--warmup", "0")
    assert (sc.warmup.duration_s, sc.warmup.requests) == (0, 0)  # --warmup 0 means no warmup at all


def test_override_that_makes_the_file_invalid_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(CLOSED)
    with pytest.raises(UserError) as info:
        load_scenario(path, overrides_from_args(_args("--concurrency", "0")))
    assert info.value.lines == [f"{path}: load.concurrency: must be greater than 0"]


def test_override_into_empty_section(tmp_path: Path) -> None:
    # `target:` left empty in the file (YAML null) still takes --target
    sc = _load(tmp_path, CLOSED + "target:\n", "--target", "http://h:2")
    assert sc.target.url == "http://h:2"


def test_apply_overrides_does_not_touch_its_input() -> None:
    data = {"load": {"concurrency": 2, "duration_s": 1}}
    out = apply_overrides(data, {"load.rate": 3.0, "load.concurrency": None})
    assert data == {"load": {"concurrency": 2, "duration_s": 1}}
    assert out["load"] == {"rate": 3.0, "duration_s": 1}


def test_resolved_scenario_round_trips(tmp_path: Path) -> None:
    sc = _load(tmp_path, OPEN, "--seed", "11")
    again = tmp_path / "again.yaml"
    again.write_text(dump_scenario(sc))
    assert load_scenario(again) == sc


def test_an_override_through_a_list_index_is_applied(tmp_path: Path) -> None:
    """Audit N3: `--set workload.classes.0.input_tokens=...` ran the file unchanged, exit 0."""
    path = tmp_path / "s.yaml"
    path.write_text(CLOSED)
    wanted = {"dist": "uniform", "min": 1000, "max": 1900}
    for key in ("workload.classes.0.input_tokens", "workload.classes[0].input_tokens"):
        sc = load_scenario(path, {key: wanted})
        tokens = sc.workload.classes[0].input_tokens
        assert (tokens.dist, tokens.min, tokens.max) == ("uniform", 1000, 1900), key
    sc = load_scenario(path, {"workload.classes[0].name": "renamed"})
    assert sc.workload.classes[0].name == "renamed"


@pytest.mark.parametrize(
    "key, says",
    [
        (
            "workload.classes.3.input_tokens",
            "override workload.classes.3.input_tokens: workload.classes has 1 entry (indexes 0-0)",
        ),
        (
            "workload.classes.first.input_tokens",
            "workload.classes is a list, so 'first' must be an index; a list entry is KEY.N.FIELD or KEY[N].FIELD",
        ),
        ("load.concurrency.users", "override load.concurrency.users: load.concurrency is a single value ('4')"),
    ],
)
def test_an_override_path_that_cannot_be_followed_is_one_line(tmp_path: Path, key: str, says: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(CLOSED)
    with pytest.raises(UserError) as err:
        load_scenario(path, {key: 1})
    assert len(err.value.lines) == 1 and says in err.value.lines[0]


def test_unset_removes_a_key_and_none_changes_nothing() -> None:
    """None is a CLI flag left out; UNSET (a null the user wrote) gives the field its default."""
    data = {
        "load": {"concurrency": 2, "duration_s": 1},
        "workload": {"tokenizer": "t.json", "classes": [{"name": "a"}]},
    }
    out = apply_overrides(data, {"workload.tokenizer": UNSET, "load.concurrency": None, "target.url": UNSET})
    assert out == {"load": {"concurrency": 2, "duration_s": 1}, "workload": {"classes": [{"name": "a"}]}}
    out = apply_overrides(data, {"load.duration_s": UNSET})  # unsetting one stop condition keeps the other keys
    assert out["load"] == {"concurrency": 2}
    with pytest.raises(UserError) as err:
        apply_overrides(data, {"workload.classes.0": UNSET})
    assert err.value.lines == [
        "override workload.classes.0: null cannot remove a list entry; give workload.classes without it"
    ]


def test_set_null_gives_the_field_its_default(tmp_path: Path) -> None:
    from harness.cli.run_flags import extra_overrides

    path = tmp_path / "s.yaml"
    path.write_text(CLOSED.replace("workload:\n", "workload:\n  tokenizer: t.json\n"))
    assert load_scenario(path).workload.tokenizer == "t.json"
    args = _args("--set", "workload.tokenizer=null", "--set", "warmup.duration_s=~")
    sc = load_scenario(path, {**overrides_from_args(args), **extra_overrides(args)})
    assert sc.workload.tokenizer is None and sc.warmup.duration_s == type(sc.warmup)().duration_s
