"""The load controller's multi-turn part: conversations, their turns and their accounting.

A session's first turn is an ordinary request: it arrives by the scenario's arrival pattern
(harness.workload.arrivals, open loop) or when a closed-loop user is free. A user holding a
conversation asks for its next turn once the previous reply has been interpreted (the Finisher,
at idle time); open loop, that turn's intended time is the reply's end plus the plan's think time
(harness.workload.sessions). The history grows off the read path, the turn counts against the
window and the request quota like any request, and a session the window ends is counted as cut.

Whether a turn may still go out, and counting it as handed out, are the controller's (its
window and quotas): this part asks through `TurnGate`. An agentic session's extra accounting is
the agent part's (harness.load.agents), reached through `AgentHooks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from harness.client.http_stream import perf_ns
from harness.metrics.record import RequestRecord
from harness.metrics.recorder import SessionStats
from harness.workload.sessions import Conversation, turn_label

if TYPE_CHECKING:
    from harness.load.controller import Item

Labels = tuple[tuple[str, str], ...]


class TurnGate(Protocol):
    """What a session's next request needs of the controller (harness.load.controller)."""

    def turn_allowed(self, warm: bool, intended: int | None) -> bool:
        """Whether a request may still go out (warmup or window, their quotas and durations)."""

    def hand_out(self, conv: Conversation, intended: int | None, warm: bool) -> Item:
        """The conversation's next request, counted as handed out."""


class AgentHooks(Protocol):
    """An agentic session's accounting (harness.load.agents.Agents)."""

    def labels(self, rec: RequestRecord, conv: Conversation) -> Labels: ...

    def request_done(self, rec: RequestRecord, conv: Conversation) -> None: ...

    def wait(self, conv: Conversation) -> None: ...

    def session_over(self, conv: Conversation, completed: bool) -> bool: ...


class Sessions:
    """think_s/next_turn and the session bookkeeping of one load process."""

    def __init__(
        self, gate: TurnGate, stats: SessionStats, count_tokens: Callable[[str], int], agents: AgentHooks
    ) -> None:
        self.gate = gate
        self.stats = stats
        self.count_tokens = count_tokens
        self.agents = agents
        # conversations with a turn in flight, and the system prompts already sent (turn 1 of a
        # later session can hit those)
        self._conv_of: dict[str, Conversation] = {}
        self._systems_seen: set[tuple[str, int]] = set()
        self._open_sessions: dict[int, Conversation] = {}  # measured sessions not ended yet

    def labels(self, rec: RequestRecord, item: Item) -> Labels:
        """At send time: the record's session and turn (and its per-turn label)."""
        p = item.planned
        if p.session is None:
            return ()
        rec.session, rec.turn = p.index, p.turn
        self._conv_of[item.request_id] = p.session
        return (("turn", turn_label(p.turn)), *self.agents.labels(rec, p.session))

    def cut_open(self) -> None:
        """The result is taken: sessions still thinking when the window ended are cut."""
        for conv in list(self._open_sessions.values()):
            self.session_over(conv)

    def think_s(self, item: Item) -> float | None:
        """After a session turn was recorded: the pause before its next turn; None when the
        session has no next turn (done or failed)."""
        conv = item.planned.session
        if conv is None or not conv.more:
            return None
        return conv.think_after_s()

    def next_turn(self, item: Item) -> Item | None:
        """The session's next turn, once `item`'s record is interpreted (the reply is history).

        Closed loop: the user has already waited the think time; the turn is sent now. Open loop:
        the turn's intended time is the previous reply's end plus the think time, so a late send
        still counts from when the user would have sent it. None (the session is cut) when the
        window, the request quota or the warmup is over."""
        conv = item.planned.session
        if conv is None or not conv.more:
            return None
        warm = item.planned.warmup
        intended = conv.next_intended_ns() if item.intended_ns is not None else None
        if not self.gate.turn_allowed(warm, intended):
            self.session_over(conv)
            return None
        self.agents.wait(conv)
        return self.gate.hand_out(conv, intended, warm)

    def session_over(self, conv: Conversation) -> None:
        """A measured session ended: completed (every turn answered) or cut (window end, failure)."""
        if conv.plan.warmup or conv.ended or conv.started_ns is None:
            return
        conv.ended = True
        self._open_sessions.pop(id(conv), None)
        completed = not conv.more and not conv.failed
        if self.agents.session_over(conv, completed):
            return  # a sub-agent: its parent is the session
        self.stats.session_end(conv.last_end_ns - conv.started_ns, conv.turn, completed)

    def before_record(self, rec: RequestRecord) -> Conversation | None:
        """Before a session turn is recorded: its ideal prefix-cache hit, its conversation's
        timeline. Returns the conversation (None: not a session's request)."""
        conv = self._conv_of.pop(rec.request_id, None) if rec.session is not None else None
        if conv is None:
            return None
        p = conv.plan
        prompt = rec.input_tokens if rec.input_tokens is not None else rec.intended_input_tokens
        if conv.turn == 0:
            conv.started_ns = rec.start_ns
            if not p.warmup and getattr(conv, "parent", None) is None:  # a sub-agent is part of its parent's session
                self._open_sessions[id(conv)] = conv
        if rec.ok:
            key = (p.class_name, p.system_id) if p.system_id is not None else None
            rec.ideal_cached_tokens = conv.ideal_cached(prompt, key in self._systems_seen)
            if key is not None:
                self._systems_seen.add(key)
        conv.last_end_ns = rec.chunk_ns[-1] if rec.chunk_ns else perf_ns()
        self.agents.request_done(rec, conv)
        return conv

    def after_record(self, rec: RequestRecord, conv: Conversation) -> None:
        """After it was recorded: the reply joins the history (or the failed session ends)."""
        prompt = rec.input_tokens if rec.input_tokens is not None else rec.intended_input_tokens
        if rec.ok:
            conv.complete(rec.reply_text or "", prompt, rec.output_tokens or 0, self.count_tokens)
        else:
            conv.failed = True  # no reply to continue from: the session ends here
        if not conv.more:
            self.session_over(conv)
