"""The load controller's agentic part.

An agentic session (harness.workload.agent) is a multi-turn session whose turns are the requests
an agent makes: the load process sends them like any session's turns (harness.load.sessions),
waiting the tool's latency or the user's think time between them. A fan-out step starts N
sub-agent conversations on the same load process (the user greenlet runs them in parallel and
joins them, harness.load.user), so a session and its sub-agents always share one process, one
endpoint under session affinity (they carry the session's index) and one history. Each request's
record says its call kind (`call` label: user, tool, join, subagent) and, for a sub-agent, its
name; the parent's timeline is accounted here: time waiting on the engine (its own requests), on
tools, on the user's think time and on its sub-agents, reported per session (SessionStats.agent).

Like the session part, it asks the controller through `TurnGate` (harness.load.sessions) whether
a sub-agent's request may go out and to count it; a session it cuts ends through `end_session`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.metrics.record import RequestRecord
from harness.metrics.recorder import SessionStats
from harness.workload.agent import TOOL, USER, AgentConversation
from harness.workload.sessions import Conversation

if TYPE_CHECKING:
    from harness.load.controller import Item
    from harness.load.sessions import TurnGate


def _root(conv: AgentConversation) -> AgentConversation:
    while conv.parent is not None:
        conv = conv.parent
    return conv


class Agents:
    """fan_out/join and the agent accounting of one load process (the session part's AgentHooks)."""

    def __init__(self, gate: TurnGate, stats: SessionStats, end_session: Callable[[Conversation], None]) -> None:
        self.gate = gate
        self.stats = stats
        self.end_session = end_session

    def labels(self, rec: RequestRecord, conv: Conversation) -> tuple[tuple[str, str], ...]:
        if not isinstance(conv, AgentConversation):
            return ()
        rec.agent = conv.agent_id
        kind = "subagent" if conv.parent is not None else conv.steps[conv.turn].kind
        return (("call", kind),)

    def request_done(self, rec: RequestRecord, conv: Conversation) -> None:
        """A request of an agentic session ended: the engine time of whoever sent it."""
        if not isinstance(conv, AgentConversation) or conv.plan.warmup:
            return
        root = _root(conv)
        root.calls += 1
        if rec.chunk_ns:
            engine_s = (rec.chunk_ns[-1] - rec.start_ns) / 1e9
            if conv is root:
                root.engine_s += engine_s
            else:
                root.sub_engine_s += engine_s

    def wait(self, conv: Conversation) -> None:
        """The next step is about to be handed out: count the wait before it (tool or think)."""
        if not isinstance(conv, AgentConversation) or conv.plan.warmup or not conv.more:
            return
        s, root = conv.steps[conv.turn], _root(conv)
        if conv is not root:
            root.sub_tool_s += s.wait_s if s.kind == TOOL else 0.0
        elif s.kind == TOOL:
            root.tool_s += s.wait_s
        elif s.kind == USER:
            root.think_s += s.wait_s

    def fan_out(self, item: Item) -> list[Item]:
        """After `item`'s reply was interpreted: the first requests of the sub-agents the next
        step waits for (none when it waits for none, or the window is over: the session is cut)."""
        conv = item.planned.session
        if not isinstance(conv, AgentConversation) or not conv.fans_out:
            return []
        warm = item.planned.warmup
        intended = conv.last_end_ns if item.intended_ns is not None else None  # delegated at once
        children = conv.spawn()
        conv.fork_ns = conv.last_end_ns
        out = []
        for child in children:
            if not self.gate.turn_allowed(warm, intended):
                child.failed = True
                continue
            out.append(self.gate.hand_out(child, intended, warm))
        if not out:
            conv.failed = True
            self.end_session(conv)
        return out

    def join(self, item: Item) -> None:
        """Every sub-agent of `item`'s session has returned (or was cut): the parent continues from
        the last one's end, or is cut with them."""
        conv = item.planned.session
        assert isinstance(conv, AgentConversation)
        children = conv.children
        if any(c.failed or c.more for c in children) or not children:
            conv.failed = True
            self.end_session(conv)
            return
        end = max(c.last_end_ns for c in children)
        if not conv.plan.warmup:
            _root(conv).subagent_s += max(0, end - conv.fork_ns) / 1e9
        conv.last_end_ns = end

    def session_over(self, conv: Conversation, completed: bool) -> bool:
        """A session ended: True when it is a sub-agent (its parent accounts for it), after adding
        an agentic root's timeline to the session statistics."""
        if not isinstance(conv, AgentConversation):
            return False
        if conv.parent is not None:
            return True
        self.stats.agent_end(conv, completed)
        return False
