"""Dataset classes: prompts replayed from JSONL (prompt / messages / ShareGPT), seeded choice,
one-line errors naming file and line, the file's content in the fingerprint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.client.adapters.base import Prompt, get_adapter
from harness.errors import UserError
from harness.scenario import Scenario
from harness.scenario.loader import validate
from harness.workload.builtin_tokenizer import BuiltinTokenizer
from harness.workload.fingerprint import fingerprint
from harness.workload.generator import WorkloadGenerator, expected_prefix_hit_rate

RECORDS = [
    {"prompt": "alpha beta gamma", "output_tokens": 7},
    {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is a cache"}],
        "output_tokens": 9,
    },
    {"conversations": [{"from": "human", "value": "one two"}, {"from": "gpt", "value": "a b c d e"}]},
    {"prompt": "no length here"},
]


def _write(tmp_path: Path, records: list[Any], name: str = "d.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n\n")
    return path


def _scenario(dataset: dict[str, Any], **cls: Any) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "d",
            "seed": 5,
            "load": {"concurrency": 2, "requests": 10},
            "workload": {"classes": [{"name": "replay", "dataset": dataset, **cls}]},
        }
    )


def test_three_formats_and_lengths(tmp_path):
    _write(tmp_path, RECORDS)
    gen = WorkloadGenerator(
        _scenario({"path": "d.jsonl", "order": "sequential"}, output_tokens=33), BuiltinTokenizer(), tmp_path
    )
    reqs = [gen.request(i) for i in range(5)]
    assert [(r.text, r.input_tokens, r.output_tokens) for r in reqs[:4]] == [
        ("alpha beta gamma", 3, 7),
        ("be brief\n\nwhat is a cache", 6, 9),
        ("one two", 2, 5),  # the ShareGPT reply's length is the output length
        ("no length here", 3, 33),  # the class's output_tokens for a record without one
    ]
    assert reqs[4].text == reqs[0].text  # sequential cycles
    assert reqs[1].messages == (
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what is a cache"},
    )
    assert reqs[0].messages is None and reqs[0].prefix == "" and reqs[0].prefix_id is None
    # warmup walks the file from its end in sequential order
    assert gen.request(0, warmup=True).text == "no length here"


def test_random_order_is_seeded_and_covers_the_file(tmp_path):
    _write(tmp_path, RECORDS)
    sc = _scenario({"path": "d.jsonl"}, output_tokens=10)
    a = [WorkloadGenerator(sc, None, tmp_path).request(i).text for i in range(40)]
    b = [WorkloadGenerator(sc, None, tmp_path).request(i).text for i in range(40)]
    assert a == b and len(set(a)) == 4
    other = WorkloadGenerator(sc.model_copy(update={"seed": 6}), None, tmp_path)
    assert [other.request(i).text for i in range(40)] != a


def test_chat_adapter_sends_the_recorded_messages(tmp_path):
    chat = get_adapter("openai-chat")
    msgs = ({"role": "system", "content": "s"}, {"role": "user", "content": "u"})
    body = chat.build_body(Prompt("", "s\n\nu", 5, msgs), "m", {}, {})
    assert body["messages"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    body = get_adapter("openai-completions").build_body(Prompt("", "s\n\nu", 5, msgs), "m", {}, {})
    assert body["prompt"] == "s\n\nu"  # completions: the messages as one text


@pytest.mark.parametrize(
    "line, fragment",
    [
        ("{not json", "d.jsonl:1: not JSON"),
        (json.dumps({"text": "x"}), "d.jsonl:1: needs prompt (text), messages (chat) or conversations (ShareGPT)"),
        (json.dumps({"prompt": "x", "output_tokens": 0}), "d.jsonl:1: output_tokens must be a whole number >= 1"),
        (json.dumps({"messages": [{"role": "user"}]}), "d.jsonl:1: each message needs a string role and content"),
        (json.dumps({"conversations": [{"from": "gpt", "value": "x"}]}), "d.jsonl:1: no user turn"),
        (json.dumps({"prompt": "   "}), "d.jsonl:1: empty prompt"),
        (json.dumps([1, 2]), "d.jsonl:1: expected a JSON object"),
        # a ValueError that is no JSONDecodeError (Python's int digit limit): was AttributeError 'msg', exit 70
        (
            '{"prompt": "x", "output_tokens": ' + "1" * 5000 + "}",
            "d.jsonl:1: not JSON (Exceeds the limit (4300 digits)",
        ),
    ],
)
def test_bad_records_are_one_line_errors(tmp_path, line, fragment):
    _write(tmp_path, [line])
    with pytest.raises(UserError) as exc:
        WorkloadGenerator(_scenario({"path": "d.jsonl"}, output_tokens=4), None, tmp_path)
    assert any(fragment in msg for msg in exc.value.lines), exc.value.lines


def test_many_bad_lines_stop_after_five(tmp_path):
    _write(tmp_path, ["{bad"] * 20)
    with pytest.raises(UserError) as exc:
        WorkloadGenerator(_scenario({"path": "d.jsonl"}, output_tokens=4), None, tmp_path)
    assert len(exc.value.lines) == 6 and "stopped after 5 bad lines" in exc.value.lines[-1]


def test_missing_file_empty_file_and_missing_output_length(tmp_path):
    with pytest.raises(UserError, match=r"cannot read .*nope\.jsonl .*relative to the scenario file"):
        WorkloadGenerator(_scenario({"path": "nope.jsonl"}, output_tokens=4), None, tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(UserError, match="holds no records"):
        WorkloadGenerator(_scenario({"path": "empty.jsonl"}, output_tokens=4), None, tmp_path)
    _write(tmp_path, RECORDS)
    with pytest.raises(UserError, match=r"output_tokens: .* has records without output_tokens"):
        WorkloadGenerator(_scenario({"path": "d.jsonl"}), None, tmp_path)


@pytest.mark.parametrize(
    "cls, fragment",
    [
        (
            {"dataset": {"path": "d.jsonl"}, "input_tokens": 5, "output_tokens": 5},
            "input_tokens: a dataset's prompts have their own lengths",
        ),
        (
            {"dataset": {"path": "d.jsonl"}, "output_tokens": 5, "shared_prefix": {"tokens": 8}},
            "shared_prefix: a dataset's prompts are sent as they are",
        ),
        ({"output_tokens": 5}, "input_tokens required (a length or a distribution), or a dataset of prompts"),
        ({"dataset": {"path": "d.jsonl", "order": "shuffled"}}, "order"),
    ],
)
def test_class_validation(cls, fragment):
    data = {"name": "d", "load": {"concurrency": 1, "requests": 1}, "workload": {"classes": [{"name": "c", **cls}]}}
    with pytest.raises(UserError) as exc:
        validate(Scenario, data, "s.yaml")
    assert any(fragment in line and line.startswith("s.yaml: workload.classes[0]") for line in exc.value.lines), (
        exc.value.lines
    )


def test_fingerprint_follows_the_content_not_the_path(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _write(a, RECORDS)
    _write(b, RECORDS, name="renamed.jsonl")
    fa = fingerprint(_scenario({"path": "d.jsonl"}, output_tokens=4), base_dir=a)
    fb = fingerprint(_scenario({"path": "renamed.jsonl"}, output_tokens=4), base_dir=b)
    assert fa == fb
    _write(b, RECORDS[:3], name="renamed.jsonl")
    fc = fingerprint(_scenario({"path": "renamed.jsonl"}, output_tokens=4), base_dir=b)
    assert fc["parts"]["workload"] != fa["parts"]["workload"] and fc["parts"]["load"] == fa["parts"]["load"]


def test_no_expected_prefix_hit_rate_with_a_dataset_in_the_mix():
    sc = Scenario.model_validate(
        {
            "name": "d",
            "load": {"concurrency": 1, "requests": 1},
            "workload": {
                "classes": [
                    {"name": "sys", "input_tokens": 200, "output_tokens": 5, "shared_prefix": {"tokens": 128}},
                    {"name": "replay", "dataset": {"path": "d.jsonl"}, "output_tokens": 5},
                ]
            },
        }
    )
    assert expected_prefix_hit_rate(sc) is None
