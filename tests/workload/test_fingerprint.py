"""The fingerprint names the work: stable, changes with what defines it, not with the target."""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import pytest

from harness.scenario import Scenario
from harness.workload.fingerprint import fingerprint, fingerprint_parts

BASE: dict[str, Any] = {
    "name": "fp",
    "seed": 1,
    "target": {"url": "http://a:1", "model": "m1"},
    "load": {"concurrency": 4, "duration_s": 10},
    "sampling": {"temperature": 0.0},
    "slo": {"ttft_ms": 100},
    "workload": {
        "classes": [
            {
                "name": "a",
                "input_tokens": 100,
                "output_tokens": 50,
                "shared_prefix": {"tokens": 20, "count": 2},
                "slo": {"ttft_ms": 50},
            }
        ]
    },
}


def _fp(change=None) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    if change:
        change(data)
    return fingerprint(Scenario.model_validate(data))


def _set(path: str, value: Any):
    def change(data: dict[str, Any]) -> None:
        node = data
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node.setdefault(k, {})
        node[keys[-1]] = value

    return change


def test_stable_within_a_process() -> None:
    assert _fp() == _fp()
    assert len(_fp()["value"]) == 16


def test_stable_across_processes() -> None:
    code = (
        "import json,sys; from harness.scenario import Scenario; from harness.workload.fingerprint import fingerprint; "
        "print(fingerprint(Scenario.model_validate(json.loads(sys.argv[1])))['value'])"
    )
    import json

    out = subprocess.run([sys.executable, "-c", code, json.dumps(BASE)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == _fp()["value"]


@pytest.mark.parametrize(
    "path,value,part",
    [
        ("workload.classes.0.input_tokens", 101, "workload"),
        ("workload.classes.0.output_tokens", 51, "workload"),
        ("workload.classes.0.shared_prefix", {"tokens": 20, "count": 3}, "workload"),
        ("workload.classes.0.weight", 2.0, "workload"),
        ("sampling.temperature", 0.7, "sampling"),
        ("sampling.ignore_eos", False, "sampling"),
        ("load.concurrency", 8, "load"),
        ("load.duration_s", 11, "load"),
        ("warmup", {"requests": 3}, "warmup"),
        ("seed", 2, "seed"),
        ("target.api", "openai-completions", "api"),
    ],
)
def test_changes_with_the_work(path: str, value: Any, part: str) -> None:
    base, changed = _fp(), _fp(_set(path, value))
    assert changed["value"] != base["value"]
    differing = {k for k in base["parts"] if base["parts"][k] != changed["parts"][k]}
    assert differing == {part}


def test_changes_with_the_tokenizer() -> None:
    sc = Scenario.model_validate(BASE)
    assert fingerprint(sc, "hf-1234")["value"] != fingerprint(sc)["value"]


@pytest.mark.parametrize(
    "path,value",
    [
        ("target.url", "http://b:2"),
        ("target.model", "other-model"),
        ("target.api_key_env", "KEY"),
        ("name", "renamed"),
        ("description", "words"),
        ("slo.ttft_ms", 999),
        ("workload.classes.0.slo", {"ttft_ms": 1}),
        ("telemetry.enabled", False),
    ],
)
def test_unchanged_by_target_and_judgement(path: str, value: Any) -> None:
    assert _fp(_set(path, value)) == _fp()


def test_parts_are_named() -> None:
    assert set(fingerprint_parts(Scenario.model_validate(BASE))) == {
        "workload",
        "sampling",
        "load",
        "warmup",
        "seed",
        "api",
    }


def test_default_is_the_builtin_tokenizer_a_run_records() -> None:
    from harness.workload.builtin_tokenizer import BuiltinTokenizer

    sc = Scenario.model_validate(BASE)
    assert fingerprint(sc) == fingerprint(sc, BuiltinTokenizer().id)
