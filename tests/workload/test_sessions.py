"""Session plans are a pure function of the seed; the history holds the replies as streamed back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.scenario.models import Scenario
from harness.workload.generator import WorkloadGenerator
from harness.workload.sessions import Conversation, turn_label


def _scenario(**session) -> Scenario:
    spec = {
        "turns": {"dist": "uniform", "min": 2, "max": 5},
        "user_tokens": 20,
        "output_tokens": 8,
        "think_time_s": {"dist": "exponential", "mean": 1.5},
        "system_prompt": {"tokens": 40, "count": 2},
    }
    spec.update(session)
    return Scenario.model_validate(
        {
            "name": "s",
            "seed": 5,
            "load": {"concurrency": 1, "requests": 10},
            "workload": {"classes": [{"name": "chat", "session": spec}]},
        }
    )


def test_plan_is_deterministic_and_turns_carry_the_history() -> None:
    a, b = WorkloadGenerator(_scenario()), WorkloadGenerator(_scenario())
    first, again = a.request(3), b.request(3)
    assert first.session is not None and first.turn == 1
    assert first.session.plan == again.session.plan
    assert first.messages == again.messages
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.input_tokens == 40 + 20
    conv = first.session
    conv.complete(" alpha beta gamma", first.input_tokens, 3, lambda t: len(t.split()))
    second = a.session_turn(conv)
    assert second.turn == 2
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "user"]
    assert second.messages[2]["content"] == " alpha beta gamma"
    assert second.input_tokens == 40 + 20 + 3 + 20
    # what a prefix cache could serve of turn 2: the previous prompt + reply, whole blocks, < the prompt
    assert conv.ideal_cached(second.input_tokens, True, block=16) == (63 // 16) * 16
    # other seeds, other plans
    other = WorkloadGenerator(_scenario()).request(4).session.plan
    assert other != first.session.plan


def test_turn_one_hits_only_a_system_prompt_sent_before() -> None:
    conv = WorkloadGenerator(_scenario()).request(0).session
    assert conv is not None
    assert conv.ideal_cached(60, False, block=16) == 0
    assert conv.ideal_cached(60, True, block=16) == 32


def test_turn_labels_are_bounded() -> None:
    assert turn_label(1) == "1" and turn_label(15) == "15" and turn_label(99) == "16+"


def test_recorded_conversations_replay_user_turns_in_order(tmp_path: Path) -> None:
    (tmp_path / "c.jsonl").write_text(
        json.dumps(
            {
                "conversations": [
                    {"from": "system", "value": "be brief"},
                    {"from": "human", "value": "one two three"},
                    {"from": "gpt", "value": "a b"},
                    {"from": "human", "value": "four five"},
                    {"from": "gpt", "value": "c d e f"},
                ]
            }
        )
        + "\n"
    )
    sc = Scenario.model_validate(
        {
            "name": "s",
            "load": {"concurrency": 1, "requests": 2},
            "workload": {
                "classes": [{"name": "chat", "session": {"dataset": {"path": "c.jsonl", "order": "sequential"}}}]
            },
        }
    )
    gen = WorkloadGenerator(sc, base_dir=tmp_path)
    req = gen.request(0)
    conv: Conversation = req.session
    assert [t.text for t in conv.plan.turns] == ["one two three", "four five"]
    assert [t.max_tokens for t in conv.plan.turns] == [2, 4]  # the recorded replies' lengths
    assert req.messages[0] == {"role": "system", "content": "be brief"}


@pytest.mark.parametrize(
    "session, fix",
    [
        ({"turns": 3, "output_tokens": 8}, "user_tokens required"),
        ({"turns": 3, "user_tokens": 8, "output_tokens": 8, "think_time_s": -1}, "greater than or equal"),
        ({"turns": 3, "user_tokens": 8, "output_tokens": 8, "pause": 1}, "Extra inputs"),
    ],
)
def test_bad_session_blocks_are_refused(session, fix) -> None:
    with pytest.raises(Exception, match=fix):
        Scenario.model_validate(
            {
                "name": "s",
                "load": {"concurrency": 1, "requests": 1},
                "workload": {"classes": [{"name": "c", "session": session}]},
            }
        )


def test_session_class_takes_no_plain_lengths() -> None:
    with pytest.raises(Exception, match="a session class takes its lengths from session"):
        Scenario.model_validate(
            {
                "name": "s",
                "load": {"concurrency": 1, "requests": 1},
                "workload": {
                    "classes": [
                        {"name": "c", "input_tokens": 5, "session": {"turns": 2, "user_tokens": 4, "output_tokens": 4}}
                    ]
                },
            }
        )


def test_missing_session_dataset_is_a_user_error(tmp_path: Path) -> None:
    sc = Scenario.model_validate(
        {
            "name": "s",
            "load": {"concurrency": 1, "requests": 2},
            "workload": {"classes": [{"name": "chat", "session": {"dataset": {"path": "nope.jsonl"}}}]},
        }
    )
    with pytest.raises(UserError, match=r"session dataset nope\.jsonl"):
        WorkloadGenerator(sc, base_dir=tmp_path)
