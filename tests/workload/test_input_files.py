"""Input files a scenario names are read as regular files of bounded size (audit R10): a dataset,
trace or quality file at /dev/zero was read until MemoryError (exit 70), a FIFO blocked until
killed, a dataset prompt over HARNESS_MAX_TOKENS was counted for a minute and sent, and a line
nested 200,000 deep ended in a RecursionError."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.quality.dataset import load_quality_set
from harness.scenario.models import Trace
from harness.scenario.yaml_io import load_yaml_file
from harness.workload.arrivals.trace import load_gaps
from harness.workload.builtin_tokenizer import BuiltinTokenizer
from harness.workload.dataset import load_dataset


def _readers(path: str, base: Path):
    yield "dataset", lambda: load_dataset(path, base, BuiltinTokenizer())
    yield "trace", lambda: load_gaps(Trace(path=path), base)
    yield "quality", lambda: load_quality_set(path, base)
    yield "yaml", lambda: load_yaml_file(base / path, "scenario YAML file")


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_what_is_not_a_regular_file_is_one_line(tmp_path: Path, kind: str) -> None:
    if kind == "device":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero")
        path, says = "/dev/zero", "is a device, a pipe or a socket, not a file"
    elif kind == "fifo":
        os.mkfifo(tmp_path / "fifo.jsonl")  # no writer: an open() would block forever
        path, says = "fifo.jsonl", "is a device, a pipe or a socket, not a file"
    else:
        (tmp_path / "dir.jsonl").mkdir()
        path, says = "dir.jsonl", "s a directory"  # "(Is a directory)", or "is a directory" for YAML
    for name, read in _readers(path, tmp_path):
        with pytest.raises(UserError) as err:
            read()
        assert len(err.value.lines) == 1 and says in err.value.lines[0], (name, err.value.lines)


def test_a_file_over_the_input_limit_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_MAX_INPUT_BYTES", "1000")
    (tmp_path / "big.jsonl").write_text(json.dumps({"prompt": "word " * 400}) + "\n")
    for name, read in _readers("big.jsonl", tmp_path):
        with pytest.raises(UserError) as err:
            read()
        assert (
            "bytes in one input file is above the limit of 1,000 (set HARNESS_MAX_INPUT_BYTES=N" in err.value.lines[0]
        ), name


def test_a_dataset_prompt_over_the_token_limit_and_a_deep_line_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_MAX_TOKENS", "100")
    (tmp_path / "d.jsonl").write_text(
        json.dumps({"prompt": "word " * 150})
        + "\n"
        + json.dumps({"prompt": "x " * 5000})
        + "\n"
        + '{"prompt": '
        + "[" * 100_000
        + "]" * 100_000
        + "}\n"
    )
    with pytest.raises(UserError) as err:
        load_dataset("d.jsonl", tmp_path, BuiltinTokenizer())
    lines = err.value.lines
    assert "d.jsonl:1: the prompt and its output: 150 tokens in one request is above the limit of 100" in lines[0]
    assert "d.jsonl:2: the prompt has 10,000 characters, far above the limit of 100 tokens" in lines[1]
    assert lines[2].endswith("d.jsonl:3: nested too deeply to read") and len(lines) == 3
