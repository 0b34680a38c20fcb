"""The longest request a workload sends, by the generator's own rules: what tune sets as
--max-model-len and what run checks against a server's limit. The audit's case: a 3,000-token
shared prefix with input_tokens 50-200 sent 3,001-token prompts while tune sized max-model-len
from the declared lengths (360), and every request was refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.scenario.models import Scenario
from harness.workload.context import TEMPLATE_TOKENS, class_lengths, required_context
from harness.workload.generator import WorkloadGenerator


def scenario(*classes: dict, api: str = "openai-completions") -> Scenario:
    return Scenario.model_validate(
        {
            "name": "s",
            "seed": 3,
            "target": {"api": api},
            "load": {"concurrency": 1, "requests": 1},
            "workload": {"classes": list(classes)},
        }
    )


def test_shared_prefix_is_part_of_input_tokens_and_matches_what_the_generator_sends():
    sc = scenario(
        {
            "name": "a",
            "input_tokens": {"dist": "uniform", "min": 2100, "max": 2300},
            "output_tokens": 32,
            "shared_prefix": {"tokens": 2000},
        }
    )
    (length,) = class_lengths(sc)
    assert (length.prompt, length.output) == (2300, 32)
    gen = WorkloadGenerator(sc)
    assert max(gen.request(i).input_tokens for i in range(300)) <= length.prompt
    # a rare draw shorter than the prefix still sends the prefix + 1 token: counted
    wide = scenario(
        {
            "name": "a",
            "input_tokens": {"dist": "lognormal", "mean": 3000, "max": 3100},
            "output_tokens": 8,
            "shared_prefix": {"tokens": 2500},
        }
    )
    assert class_lengths(wide)[0].prompt == 3100


def test_contradicting_prefix_is_refused_at_load_time():
    with pytest.raises(ValueError, match=r"shared_prefix.tokens 3000 is not shorter than input_tokens \(50..200\)"):
        scenario(
            {
                "name": "a",
                "input_tokens": {"dist": "uniform", "min": 50, "max": 200},
                "output_tokens": 16,
                "shared_prefix": {"tokens": 3000},
            }
        )


def test_session_history_counts_every_earlier_turn_and_reply():
    sc = scenario(
        {
            "name": "chat",
            "session": {
                "turns": {"dist": "uniform", "min": 2, "max": 4},
                "user_tokens": 100,
                "output_tokens": {"dist": "uniform", "min": 10, "max": 50},
                "system_prompt": {"tokens": 500},
            },
        },
        api="openai-chat",
    )
    (length,) = class_lengths(sc)
    # the 4th turn repeats the system prompt, 3 user messages and 3 replies, adds its own message
    assert length.prompt == 500 + 4 * 100 + 3 * 50 and length.output == 50
    assert length.messages == 9
    tokens, how = required_context([sc])
    assert tokens == 500 + 400 + 150 + 50 + 9 * TEMPLATE_TOKENS["openai-chat"]
    assert "4 turns" in how and "system prompt" in how and "chat template" in how


def test_dataset_prompts_have_their_records_lengths(tmp_path: Path):
    rows = [{"prompt": "word " * 40, "output_tokens": 10}, {"prompt": "word " * 300, "output_tokens": 20}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    sc = scenario({"name": "d", "dataset": {"path": "d.jsonl"}, "output_tokens": 64})
    (length,) = class_lengths(sc, tmp_path)
    assert length.output == 20 and 290 <= length.prompt <= 310


def test_unbounded_lengths_say_which_class():
    sc = scenario({"name": "open", "input_tokens": {"dist": "lognormal", "mean": 300}, "output_tokens": 16})
    tokens, how = required_context([sc])
    assert tokens is None and "open" in how
