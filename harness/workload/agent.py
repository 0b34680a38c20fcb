"""Agentic sessions: a user's turns broken into the requests an agent makes, with tool calls and
sub-agents.

After each user message the assistant calls tools before it answers: the request's reply is the
tool call (a short reply, `call_tokens`), the tool runs (`tool_latency_s`), its result
(`tool_result_tokens`) goes back in the next request with the whole history, and the last call of
the turn is the answer (`output_tokens`). A tool call may instead fan out (`fan_out`): N
sub-agents each start from the parent's whole history plus a task of their own, make their own
calls (with tool calls between them) and return their last reply; the parent's next request
carries every sub-agent's result, once all have returned. The plan (how many calls, every text,
every latency, which calls fan out) is a pure function of (seed, session index), like every
request; the replies come from the server and are sent back as they streamed.

`AgentConversation` is a `Conversation` whose turns are these steps; the load layer sends them
in order (harness.load.sessions, harness.load.agents), waits the planned tool latency or think
time between them, runs a fan-out's sub-agents in parallel on the same load process and joins
them. The history as it is sent:

  openai format: the tool call is an assistant message with `tool_calls` (function `tool`, the
  reply as its `input` argument) and the result a `tool` message, as agents send them;
  text format: the call is assistant text and the result a user message (any chat template).

Ideal prefix-cache hit of a request: the previous request's prompt (and, in text format, its
reply, which is then sent back verbatim) in whole blocks; a sub-agent's first request: the
parent's last prompt (the sub-agents share it); turn 1 a system prompt an earlier session sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.scenario.session import AgentSpec, SessionSpec
from harness.workload.lengths import sample_length
from harness.workload.sessions import DEFAULT_BLOCK, Conversation, SessionPlan, TurnPlan, sample_think

AGENT_DOMAIN = 13
USER, TOOL, JOIN = "user", "tool", "join"  # what a step sends: a user message, a tool's result, sub-agents' results


@dataclass(frozen=True, slots=True)
class AgentStep:
    kind: str  # USER, TOOL or JOIN
    text: str  # the user message or the tool result ("" for JOIN: the sub-agents' replies, known when they return)
    tokens: int
    max_tokens: int  # of this step's reply: a tool call's call_tokens, or the answer's output_tokens
    wait_s: float  # before this step: the think time (USER after the first) or the tool's latency (TOOL)
    fan_out: tuple[SubAgentPlan, ...] = ()  # JOIN: the sub-agents that run first


@dataclass(frozen=True, slots=True)
class SubAgentPlan:
    steps: tuple[AgentStep, ...]  # the first is its task (USER), the rest tool results (TOOL)


def _sub_agents(
    spec: AgentSpec,
    rng: np.random.Generator,
    words: Callable[[np.random.Generator, int], str],
    call_tokens: Callable[[], int],
) -> tuple[SubAgentPlan, ...]:
    fo = spec.fan_out
    assert fo is not None
    subs = []
    for _ in range(sample_length(fo.agents, rng)):
        n = sample_length(fo.steps, rng)
        result = sample_length(fo.result_tokens, rng)
        task = sample_length(fo.task_tokens, rng)
        steps = [AgentStep(USER, words(rng, task), task, result if n == 1 else call_tokens(), 0.0)]
        for k in range(1, n):
            rt = sample_length(spec.tool_result_tokens, rng)
            steps.append(
                AgentStep(
                    TOOL,
                    words(rng, rt),
                    rt,
                    result if k == n - 1 else call_tokens(),
                    sample_think(spec.tool_latency_s, rng),
                )
            )
        subs.append(SubAgentPlan(tuple(steps)))
    return tuple(subs)


def plan_agent(
    spec: SessionSpec, rng: np.random.Generator, words: Callable[[np.random.Generator, int], str]
) -> tuple[AgentStep, ...]:
    """The parent's steps for one session (user turns, tool calls, fan-outs), drawn from `rng`."""
    agent = spec.agent
    assert (
        agent is not None and spec.turns is not None and spec.user_tokens is not None and spec.output_tokens is not None
    )

    def call_tokens() -> int:
        return sample_length(agent.call_tokens, rng)

    steps: list[AgentStep] = []
    think = 0.0
    for _ in range(sample_length(spec.turns, rng)):
        n_tools = sample_length(agent.tool_calls, rng)
        output = sample_length(spec.output_tokens, rng)
        u = sample_length(spec.user_tokens, rng)
        steps.append(AgentStep(USER, words(rng, u), u, call_tokens() if n_tools else output, think))
        for j in range(n_tools):
            max_tokens = output if j == n_tools - 1 else call_tokens()
            if agent.fan_out is not None and rng.random() < agent.fan_out.probability:
                steps.append(AgentStep(JOIN, "", 0, max_tokens, 0.0, _sub_agents(agent, rng, words, call_tokens)))
            else:
                rt = sample_length(agent.tool_result_tokens, rng)
                steps.append(AgentStep(TOOL, words(rng, rt), rt, max_tokens, sample_think(agent.tool_latency_s, rng)))
        think = sample_think(spec.think_time_s, rng)
    return tuple(steps)


def agent_plan(plan: SessionPlan, steps: tuple[AgentStep, ...]) -> SessionPlan:
    """The session plan whose turns are the steps (what Conversation counts and reads)."""
    return SessionPlan(
        plan.index,
        plan.class_name,
        plan.warmup,
        plan.system,
        plan.system_tokens,
        plan.system_id,
        tuple(TurnPlan(s.text, s.tokens, s.max_tokens, s.wait_s) for s in steps),
    )


@dataclass(slots=True)
class AgentConversation(Conversation):
    """An agentic session (or one of its sub-agents) as it went; mutated only when a step's record
    is interpreted (the load process's idle time)."""

    steps: tuple[AgentStep, ...] = ()
    tool_format: str = "openai"
    count: Callable[[str], int] = len
    parent: AgentConversation | None = None  # set on a sub-agent
    agent_id: str | None = None  # a sub-agent's name: "<fan-out>.<agent>" (1-based)
    turn_offset: int = 0  # a sub-agent's first request continues the parent's turn numbers
    fan_outs: int = 0  # fan-outs started so far (names the next one's sub-agents)
    last_reply: str = ""
    #: the parent's timeline (seconds): waiting on the engine (its own requests), on tools, on the
    #: user's think time, on sub-agents (a fan-out's fork to its join); sub-agents count their own
    engine_s: float = 0.0
    tool_s: float = 0.0
    think_s: float = 0.0
    subagent_s: float = 0.0
    sub_engine_s: float = 0.0  # the sub-agents' own requests, summed (they overlap each other)
    sub_tool_s: float = 0.0  # the sub-agents' own tool latencies, summed
    calls: int = 0  # requests of the whole session (its sub-agents' included)
    tool_calls: int = 0
    subagents: int = 0
    fork_ns: int = 0
    call_msg_tokens: int = 0  # the last tool call as sent back (openai format: not the reply verbatim)
    children: list[AgentConversation] = field(default_factory=list)

    @property
    def step(self) -> AgentStep:
        return self.steps[self.turn]

    def _input(self) -> tuple[dict[str, Any], int]:
        """The next step's new message and its tokens: the user's message, a tool's result, or
        every sub-agent's last reply (once they have all returned)."""
        s = self.steps[self.turn]
        if s.kind == USER:
            return {"role": "user", "content": s.text}, s.tokens
        text = s.text if s.kind == TOOL else "\n\n".join(c.last_reply for c in self.children)
        tokens = s.tokens if s.kind == TOOL else self.count(text)
        if self.tool_format == "openai":
            return {"role": "tool", "tool_call_id": self._call_id(self.turn - 1), "content": text}, tokens
        return {"role": "user", "content": text}, tokens

    def next_messages(self) -> tuple[tuple[dict[str, Any], ...], str, int, int]:
        msg, tokens = self._input()
        msgs = (*self.messages, msg)
        return msgs, "\n\n".join(_text(m) for m in msgs), self.history_tokens + tokens, self.steps[self.turn].max_tokens

    def turn_number(self) -> int:
        return self.turn_offset + self.turn + 1

    def _call_id(self, turn: int) -> str:
        return f"call_{self.agent_id or 's'}_{turn}"

    def ideal_cached(self, prompt_tokens: int, system_seen: bool, block: int = DEFAULT_BLOCK) -> int:
        if self.turn == 0 and self.parent is not None:  # the parent's history: every sub-agent shares it
            return (max(0, min(self.prev_total, prompt_tokens - 1)) // block) * block
        return Conversation.ideal_cached(self, prompt_tokens, system_seen, block)

    def complete(self, reply: str, prompt_tokens: int, output_tokens: int, count: Callable[[str], int]) -> None:
        """The step's input message, then the reply: a tool call when a tool result or a fan-out
        comes next, the answer otherwise."""
        msg, tokens = self._input()
        self.messages.append(msg)
        self.history_tokens += tokens
        nxt = self.steps[self.turn + 1] if self.turn + 1 < len(self.steps) else None
        if nxt is not None and nxt.kind != USER and self.tool_format == "openai":
            args = json.dumps({"input": reply})
            self.messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": self._call_id(self.turn),
                            "type": "function",
                            "function": {"name": "tool", "arguments": args},
                        }
                    ],
                }
            )
            self.call_msg_tokens = count(args) + 1  # the function's name is one more word
            self.history_tokens += self.call_msg_tokens
            self.prev_total = prompt_tokens  # the reply is not sent back verbatim: only the prompt is reusable
        else:
            self.messages.append({"role": "assistant", "content": reply})
            self.history_tokens += count(reply) if reply else 0
            self.prev_total = prompt_tokens + output_tokens
            self.call_msg_tokens = 0
        self.last_reply = reply
        self.tool_calls += nxt is not None and nxt.kind != USER
        self.turn += 1

    def think_after_s(self) -> float:
        """The wait before the next step: a tool's latency or the user's think time."""
        return self.steps[self.turn].wait_s if self.turn < len(self.steps) else 0.0

    @property
    def fans_out(self) -> bool:
        """The next step waits for sub-agents."""
        return self.more and self.steps[self.turn].kind == JOIN

    def spawn(self) -> list[AgentConversation]:
        """The sub-agents of the next (JOIN) step: the parent's whole history plus each one's task."""
        s = self.steps[self.turn]
        self.fan_outs += 1
        self.children = []
        # the first sub-agent can reuse the parent's last prompt; the others also the tool call the
        # first one sent with it (the whole history), and so can the parent's request that joins them
        history = self.prev_total + self.call_msg_tokens
        for i, sub in enumerate(s.fan_out, 1):
            plan = SessionPlan(
                self.plan.index,
                self.plan.class_name,
                self.plan.warmup,
                "",
                0,
                None,
                tuple(TurnPlan(x.text, x.tokens, x.max_tokens, x.wait_s) for x in sub.steps),
            )
            child = AgentConversation(
                plan,
                messages=[dict(m) for m in self.messages],
                history_tokens=self.history_tokens,
                prev_total=self.prev_total if i == 1 else history,
                adapter=self.adapter,
                steps=sub.steps,
                tool_format=self.tool_format,
                count=self.count,
                parent=self,
                agent_id=f"{self.fan_outs}.{i}",
                turn_offset=self.turn_offset + self.turn,
            )
            self.children.append(child)
        self.subagents += len(self.children)
        self.prev_total = history
        return self.children


def _text(m: dict[str, Any]) -> str:
    """A message as plain text (completions APIs): its content, or its tool call's arguments."""
    if m.get("content"):
        return str(m["content"])
    calls = m.get("tool_calls") or []
    return " ".join(str(c.get("function", {}).get("arguments", "")) for c in calls)
