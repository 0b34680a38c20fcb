"""Bad scenario files: one line per problem, `file: field.path: message`, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.errors import UserError
from harness.scenario import load_scenario

GOOD = """\
name: b
load: {concurrency: 1, duration_s: 1}
workload:
  classes:
    - name: a
      input_tokens: 10
      output_tokens: 5
"""

CLASS_A = """\
    - name: a
      input_tokens: 10
      output_tokens: 5
"""

# (file text, expected line after "<file>: ")
BAD = {
    "unknown_top_key": (GOOD + "colour: red\n", "colour: unknown key; remove it or check its spelling"),
    "unknown_nested_key": (
        GOOD.replace("duration_s: 1}", "duration_s: 1, concurency: 3}"),
        "load.concurency: unknown key; remove it or check its spelling",
    ),
    "unknown_class_key": (
        GOOD + "      prefix: 3\n",
        "workload.classes[0].prefix: unknown key; remove it or check its spelling",
    ),
    "wrong_type_string": (
        GOOD.replace("concurrency: 1", "concurrency: lots"),
        "load.concurrency: must be a valid integer",
    ),
    "wrong_type_bool": (
        GOOD.replace("concurrency: 1", "concurrency: true"),
        "load.concurrency: must be a valid integer",
    ),
    "wrong_type_quoted_number": (
        GOOD.replace("concurrency: 1", 'concurrency: "4"'),
        "load.concurrency: must be a valid integer",
    ),
    "negative_mean": (
        GOOD + "    - name: c\n      input_tokens: {dist: normal, mean: -5, std: 1}\n      output_tokens: 5\n",
        "workload.classes[1].input_tokens.mean: must be greater than 0",
    ),
    "zero_fixed_length": (
        GOOD.replace("input_tokens: 10", "input_tokens: 0"),
        "workload.classes[0].input_tokens.value: must be greater than 0",
    ),
    "fractional_length": (
        GOOD.replace("input_tokens: 10", "input_tokens: 10.5"),
        "workload.classes[0].input_tokens: must be a token count (e.g. 512) or a mapping with dist: one of "
        "fixed, uniform, normal, lognormal",
    ),
    "uniform_max_below_min": (
        GOOD.replace("input_tokens: 10", "input_tokens: {dist: uniform, min: 10, max: 5}"),
        "workload.classes[0].input_tokens: max must be >= min",
    ),
    "both_concurrency_and_rate": (
        GOOD.replace("concurrency: 1", "concurrency: 1, rate: 3"),
        "load: set exactly one of concurrency (closed loop) or rate (open loop)",
    ),
    "neither_concurrency_nor_rate": (
        GOOD.replace("concurrency: 1, ", ""),
        "load: set exactly one of concurrency (closed loop) or rate (open loop)",
    ),
    "missing_duration_and_requests": (
        GOOD.replace(", duration_s: 1", ""),
        "load: set duration_s or requests (or both: whichever comes first)",
    ),
    "missing_load": (
        "\n".join(line for line in GOOD.splitlines() if not line.startswith("load")) + "\n",
        "load: required; add it",
    ),
    "bad_dist_name": (
        GOOD.replace("input_tokens: 10", "input_tokens: {dist: zipf, mean: 3}"),
        "workload.classes[0].input_tokens: dist must be one of 'fixed', 'uniform', 'normal', 'lognormal'",
    ),
    "dist_missing": (
        GOOD.replace("input_tokens: 10", "input_tokens: {mean: 10}"),
        "workload.classes[0].input_tokens: add dist: one of fixed, uniform, normal, lognormal",
    ),
    "duplicate_class_names": (GOOD + CLASS_A, "workload: class names must be unique; repeated: a"),
    "no_classes": (
        GOOD.split("workload:")[0] + "workload:\n  classes: []\n",
        "workload.classes: must not be empty",
    ),
    "bad_arrival": (
        GOOD.replace("concurrency: 1", "rate: 1, arrival: bursty"),
        "load.arrival: must be 'poisson', 'gamma', 'constant' or 'trace'",
    ),
    "negative_rate": (GOOD.replace("concurrency: 1", "rate: -2"), "load.rate: must be greater than 0"),
    "fraction_above_one": (
        GOOD + "      shared_prefix: {tokens: 8, fraction: 1.5}\n",
        "workload.classes[0].shared_prefix.fraction: must be less than or equal to 1",
    ),
    "slo_negative": (GOOD + "slo: {ttft_ms: -1}\n", "slo.ttft_ms: must be greater than 0"),
    "api_key_itself": (
        GOOD + "target: {api_key_env: sk-abc123}\n",
        "target.api_key_env: must be the NAME of an environment variable holding the key (e.g. OPENAI_API_KEY), "
        "never the key",
    ),
    "bad_api": (
        GOOD + "target: {api: grpc}\n",
        "target.api: must be 'openai-chat' or 'openai-completions'",
    ),
    "load_not_mapping": (
        GOOD.replace("load: {concurrency: 1, duration_s: 1}", "load: 5"),
        "load: must be a mapping (key: value)",
    ),
    "bad_name": (GOOD.replace("name: b", "name: my scenario"), "name: use only letters, digits, '_', '.' and '-'"),
}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_good_file_loads(tmp_path: Path) -> None:
    sc = load_scenario(_write(tmp_path, "good", GOOD))
    assert sc.load.concurrency == 1 and sc.workload.classes[0].input_tokens.value == 10


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_file_one_exact_line(tmp_path: Path, case: str) -> None:
    text, expected = BAD[case]
    path = _write(tmp_path, case, text)
    with pytest.raises(UserError) as info:
        load_scenario(path)
    assert info.value.lines == [f"{path}: {expected}"]


def test_several_problems_give_one_line_each(tmp_path: Path) -> None:
    text = (
        GOOD.replace("concurrency: 1", "concurrency: 0").replace("output_tokens: 5", "output_tokens: -1") + "extra: 1\n"
    )
    path = _write(tmp_path, "multi", text)
    with pytest.raises(UserError) as info:
        load_scenario(path)
    assert sorted(info.value.lines) == sorted(
        [
            f"{path}: extra: unknown key; remove it or check its spelling",
            f"{path}: load.concurrency: must be greater than 0",
            f"{path}: workload.classes[0].output_tokens.value: must be greater than 0",
        ]
    )


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "badyaml", "name: b\nload: {concurrency: 1, duration_s: 1\nworkload: [\n")
    with pytest.raises(UserError) as info:
        load_scenario(path)
    (line,) = info.value.lines
    assert line.startswith(f"{path}: line 3: not valid YAML (")


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n"])
def test_top_level_not_a_mapping(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, "notmap", text)
    with pytest.raises(UserError) as info:
        load_scenario(path)
    assert info.value.lines == [f"{path}: must be a YAML mapping (key: value) at the top level"]


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(UserError) as info:
        load_scenario(path)
    assert info.value.lines == [f"{path}: no such file; give the path of a scenario YAML file"]


@pytest.mark.parametrize("case", ["unknown_top_key", "negative_mean", "both_concurrency_and_rate", "bad_dist_name"])
def test_cli_prints_error_lines_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    text, expected = BAD[case]
    path = _write(tmp_path, case, text)
    rc = main(["run", str(path), "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err == f"error: {path}: {expected}\n"
    assert not (tmp_path / "run").exists()  # nothing is started for an invalid file


def test_cli_subprocess_exit_2_no_traceback(tmp_path: Path) -> None:
    """The real console script: exit code 2, only the error lines on stderr."""
    bad = _write(tmp_path, "dupe", GOOD + CLASS_A)
    for args in ([str(bad)], [str(tmp_path / "missing.yaml")], [str(_write(tmp_path, "y", "a: [\n"))]):
        proc = subprocess.run(
            [sys.executable, "-m", "harness.cli.main", "run", *args, "--quiet"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {args[0]}: "), proc.stderr


def test_values_that_exhaust_memory_or_the_parser_are_one_line(tmp_path: Path) -> None:
    """Audit R11/R14: `shared_prefix.count: 100000000` grew memory and started no run in 60 s; a
    5000-digit seed ended in an internal error (Python's 4300-digit int limit inside the YAML parser)."""
    base = "name: t\nload: {concurrency: 2, duration_s: 3}\nworkload:\n  classes:\n    - {name: a, input_tokens: 64, output_tokens: 8%s}\n"
    path = _write(tmp_path, "p.yaml", base % ", shared_prefix: {tokens: 32, count: 100000000}")
    with pytest.raises(UserError) as err:
        load_scenario(path)
    assert err.value.lines == [
        f"{path}: workload.classes[0].shared_prefix: count x tokens: 3,200,000,000 shared-prefix "
        "tokens (count x tokens) is above the limit of 20,000,000 (set HARNESS_MAX_PREFIX_TOKENS=N "
        "to raise it)"
    ]
    path = _write(tmp_path, "s.yaml", base % "" + "seed: " + "9" * 5000 + "\n")
    with pytest.raises(UserError) as err:
        load_scenario(path)
    assert len(err.value.lines) == 1 and "not valid YAML" in err.value.lines[0] and "4300 digits" in err.value.lines[0]
    path = _write(tmp_path, "s2.yaml", base % "" + f"seed: {2**64}\n")
    with pytest.raises(UserError) as err:
        load_scenario(path)
    assert err.value.lines == [f"{path}: seed: must be less than 18446744073709551616"]


def test_a_set_value_has_a_files_alias_bound() -> None:
    """Audit R11: an alias bomb through --set (refused in a file in 2.6 s) grew memory for 96 s."""
    from harness.scenario.yaml_io import load_yaml_value

    levels = ["a: &a [1,1,1,1,1,1,1,1,1]"] + [
        f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]" for p, n in zip("abcde", "bcdef", strict=True)
    ]
    bomb = "{" + ", ".join(levels) + ", g: [" + ",".join(["*f"] * 9) + "]}"
    with pytest.raises(UserError) as err:
        load_yaml_value(bomb, "--set sampling.extra_body")
    assert err.value.lines[0].startswith("--set sampling.extra_body: 6,053,451 YAML values (aliases expanded) is above")
    assert load_yaml_value("0.7", "--set x") == 0.7 and load_yaml_value("{a: [1", "--set x") == "{a: [1"
    with pytest.raises(UserError, match="duplicate key 'a'"):
        load_yaml_value("{a: 1, a: 2}", "--set x")


def test_a_control_character_is_named_by_line_and_column(tmp_path: Path) -> None:
    """Audit R17: a BEL read `x.yaml:: not valid YAML (unacceptable character #x0007 ...)`: no line, two colons."""
    path = tmp_path / "bel.yaml"
    path.write_bytes(b'name: t\ndescription: "a\x07b"\n')
    with pytest.raises(UserError) as err:
        load_scenario(path)
    assert err.value.lines == [
        f"{path}: line 2 column 16: character #x0007 is not allowed in YAML (a control "
        "character); remove it, or write it as an escape in a double-quoted string"
    ]
