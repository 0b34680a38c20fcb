"""Agentic sessions (harness/workload/agent.py): the seeded plan, the history as it is sent back
(tool calls, tool results, sub-agents' results) in both formats, and the ideal prefix reuse."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from harness.scenario.models import Scenario
from harness.workload.agent import JOIN, TOOL, USER, AgentConversation
from harness.workload.generator import WorkloadGenerator


def _scenario(**agent: object) -> Scenario:
    spec = {"tool_calls": 2, "call_tokens": 8, "tool_result_tokens": 40, "tool_latency_s": 0.25, **agent}
    return Scenario.model_validate(
        {
            "name": "a",
            "seed": 3,
            "load": {"concurrency": 1, "requests": 5},
            "workload": {
                "classes": [
                    {
                        "name": "agent",
                        "session": {
                            "turns": 2,
                            "user_tokens": 20,
                            "output_tokens": 30,
                            "think_time_s": 1.5,
                            "system_prompt": {"tokens": 64},
                            "agent": spec,
                        },
                    }
                ]
            },
        }
    )


def _conv(**agent: object) -> AgentConversation:
    planned = WorkloadGenerator(_scenario(**agent)).request(0)
    assert isinstance(planned.session, AgentConversation)
    return planned.session


def test_plan_is_seeded_and_shaped() -> None:
    c = _conv()
    assert [s.kind for s in c.steps] == [USER, TOOL, TOOL, USER, TOOL, TOOL]
    assert [s.max_tokens for s in c.steps] == [8, 8, 30, 8, 8, 30]  # tool calls short, each turn's last call answers
    assert [s.wait_s for s in c.steps] == [0.0, 0.25, 0.25, 1.5, 0.25, 0.25]  # tool latency, then think time
    assert [s.text for s in _conv().steps] == [s.text for s in c.steps]  # (seed, index) -> the same plan
    assert c.messages[0]["role"] == "system" and c.history_tokens == 64


def test_history_in_openai_format() -> None:
    c = _conv()
    msgs, _text, n_in, max_tokens = c.next_messages()
    assert [m["role"] for m in msgs] == ["system", "user"] and n_in == 84 and max_tokens == 8
    c.complete("alpha beta", 84, 2, lambda t: len(t.split()))
    assert c.messages[-1]["tool_calls"][0]["function"] == {
        "name": "tool",
        "arguments": json.dumps({"input": "alpha beta"}),
    }
    assert c.think_after_s() == 0.25
    msgs, _text, n_in, _m = c.next_messages()
    assert msgs[-1]["role"] == "tool" and msgs[-1]["tool_call_id"] == c.messages[-1]["tool_calls"][0]["id"]
    assert n_in == 84 + 4 + 40  # the call as sent back (its arguments' 3 words + the name) + the result
    # the reply is not sent back verbatim: the next request can reuse the previous prompt only
    assert c.ideal_cached(n_in, True) == 80


def test_history_in_text_format() -> None:
    c = _conv(tool_format="text")
    c.complete("alpha beta", 84, 2, lambda t: len(t.split()))
    assert c.messages[-1] == {"role": "assistant", "content": "alpha beta"}
    msgs, _t, n_in, _m = c.next_messages()
    assert msgs[-1]["role"] == "user" and n_in == 84 + 2 + 40
    assert c.ideal_cached(n_in, True) == 80  # prompt 84 + reply 2 = 86, in whole 16-token blocks


def test_fan_out_sub_agents_start_from_the_whole_history() -> None:
    c = _conv(
        tool_calls=1, fan_out={"probability": 1.0, "agents": 3, "steps": 2, "task_tokens": 10, "result_tokens": 12}
    )
    assert [s.kind for s in c.steps] == [USER, JOIN, USER, JOIN]

    def count(t: str) -> int:
        return len(t.split())

    c.complete("call words here", 92, 3, count)  # its prompt was 92 tokens (server); the call sent back is 5
    assert c.fans_out
    subs = c.spawn()
    assert [s.agent_id for s in subs] == ["1.1", "1.2", "1.3"] and len({id(s.messages) for s in subs}) == 3
    for s in subs:
        msgs, _t, n_in, max_tokens = s.next_messages()
        assert msgs[:-1] == tuple(c.messages) and msgs[-1]["role"] == "user" and n_in == c.history_tokens + 10
        assert max_tokens == 8 and s.turn_number() == 2  # its first call is a tool call; turns continue the parent's
    # the first sub-agent reuses the parent's prompt, the others also the call it sent with it
    assert subs[0].ideal_cached(200, True) == 80 and subs[1].ideal_cached(200, True) == 96  # 92, 97 -> whole blocks
    for s in subs:
        s.complete("x", 100, 1, count)
        s.complete(f"result of {s.agent_id}", 150, 3, count)
        assert not s.more and s.last_reply == f"result of {s.agent_id}"
    msgs, _t, _n, _m = c.next_messages()
    assert msgs[-1]["content"] == "result of 1.1\n\nresult of 1.2\n\nresult of 1.3"


def test_agent_needs_generated_sessions() -> None:
    with pytest.raises(ValidationError, match="agentic sessions are generated"):
        Scenario.model_validate(
            {
                "name": "a",
                "load": {"concurrency": 1, "requests": 5},
                "workload": {
                    "classes": [
                        {
                            "name": "a",
                            "session": {
                                "dataset": {"path": "x.jsonl"},
                                "agent": {"tool_calls": 1, "tool_result_tokens": 8},
                            },
                        }
                    ]
                },
            }
        )
