"""The controller's multi-turn half (mixed into harness.load.controller.LoadController).

A session's first turn is an ordinary request: it arrives by the scenario's arrival pattern
(harness.workload.arrivals, open loop) or when a closed-loop user is free. A user holding a
conversation asks for its next turn once the previous reply has been interpreted (the Finisher,
at idle time); open loop, that turn's intended time is the reply's end plus the plan's think time
(harness.workload.sessions). The history grows off the read path, the turn counts against the
window and the request quota like any request, and a session the window ends is counted as cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.client.http_stream import perf_ns
from harness.load.phases import DRAIN, MEASURE, WARMUP
from harness.metrics.record import RequestRecord
from harness.workload.sessions import Conversation, turn_label

if TYPE_CHECKING:
    from harness.load.controller import Item


class SessionTurns:
    """think_s/next_turn and the session bookkeeping; `self` is the LoadController."""

    phase: str

    def _init_sessions(self) -> None:
        # conversations with a turn in flight, and the system prompts already sent (turn 1 of a
        # later session can hit those)
        self._conv_of: dict[str, Conversation] = {}
        self._systems_seen: set[tuple[str, int]] = set()
        self._open_sessions: dict[int, Conversation] = {}  # measured sessions not ended yet

    def _session_labels(self, rec: RequestRecord, item: Item) -> tuple[tuple[str, str], ...]:
        """At send time: the record's session and turn (and its per-turn label)."""
        p = item.planned
        if p.session is None:
            return ()
        rec.session, rec.turn = p.index, p.turn
        self._conv_of[item.request_id] = p.session
        return (("turn", turn_label(p.turn)),) + self._agent_labels(rec, p.session)  # type: ignore[attr-defined]

    def _cut_open_sessions(self) -> None:
        for conv in list(self._open_sessions.values()):  # still thinking when the window ended: cut
            self._session_over(conv)

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
        if not self._turn_allowed(warm, intended):
            self._session_over(conv)
            return None
        self._agent_wait(conv)  # type: ignore[attr-defined]
        return self._hand_out(conv, intended, warm)

    def _turn_allowed(self, warm: bool, intended: int | None) -> bool:
        """Whether a session's next request may still go out: inside the warmup (its quota and
        duration) or inside the measured window (its quota and duration; open loop, an intended
        time before the window's end)."""
        now = perf_ns()
        when = intended if intended is not None else now
        load = self.scenario.load
        if warm:
            w = self.scenario.warmup
            quota = w.requests // self.plan.workers + (1 if self.plan.worker < w.requests % self.plan.workers else 0)
            ok = self.phase == WARMUP and not (w.requests > 0 and self.warm_sent >= quota)
            if ok and w.duration_s > 0:
                ok = when - self.started_ns < w.duration_s * 1e9
            if ok and intended is not None:
                ok = intended < self._warm_window_due_ns()
            return ok
        ok = self.phase == MEASURE or (self.phase == DRAIN and self.open_loop and self.window_end_ns is not None
                                       and when < self.window_end_ns)
        if ok and load.requests is not None and self.sent >= self._my_request_quota():
            ok = False
            if not self.open_loop:
                self._end_window()
        if ok and load.duration_s is not None and self.window_start_ns is not None \
                and when - self.window_start_ns >= load.duration_s * 1e9:
            ok = False
        return ok

    def _hand_out(self, conv: Conversation, intended: int | None, warm: bool) -> Item:
        """The conversation's next request, counted as handed out (in flight, sent, scheduled)."""
        nxt = self._item(self.generator.session_turn(conv), intended)
        self.in_flight += 1
        if warm:
            self.warm_sent += 1
            self._warm_unsent += intended is not None
        else:
            self.sent += 1
            self.scheduled += intended is not None
        return nxt

    def _session_over(self, conv: Conversation) -> None:
        """A measured session ended: completed (every turn answered) or cut (window end, failure)."""
        if conv.plan.warmup or conv.ended or conv.started_ns is None:
            return
        conv.ended = True
        self._open_sessions.pop(id(conv), None)
        completed = not conv.more and not conv.failed
        if self._agent_session_over(conv, completed):  # type: ignore[attr-defined]
            return  # a sub-agent: its parent is the session
        self.metrics.sessions.session_end(conv.last_end_ns - conv.started_ns, conv.turn, completed)

    def _session_turn_done(self, rec: RequestRecord) -> None:
        """Before a session turn is recorded: its ideal prefix-cache hit; after: the history grows."""
        conv = self._conv_of.pop(rec.request_id, None)
        if conv is None:
            return
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
        self._agent_request_done(rec, conv)  # type: ignore[attr-defined]
        return None

    def _session_advance(self, rec: RequestRecord, conv: Conversation) -> None:
        prompt = rec.input_tokens if rec.input_tokens is not None else rec.intended_input_tokens
        if rec.ok:
            conv.complete(rec.reply_text or "", prompt, rec.output_tokens or 0, self.count_tokens)
        else:
            conv.failed = True  # no reply to continue from: the session ends here
        if not conv.more:
            self._session_over(conv)

