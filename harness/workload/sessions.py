"""Multi-turn sessions: the seeded plan of a conversation, and its history as it actually went.

`plan_session` is a pure function of (seed, domain, session index), like every other request:
the turn count, each user message (words from the seed), each reply's max_tokens and the think
times. A `Conversation` then holds the history as sent: turn k's messages are the system prompt,
the earlier user turns, the assistant's replies exactly as they streamed back, and the new user
message. The history is extended when a turn's record is interpreted (the load process's idle
time, never between two stamped reads).

The ideal prefix-cache hit of turn k is computed from what the engine could have kept: the
previous turn's prompt and reply, in whole blocks, at most the prompt minus its last token (an
engine always computes one); turn 1 can hit only a system prompt an earlier session sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import UserError
from harness.scenario.session import ExponentialTime, FixedTime, LogNormalTime, SessionSpec, UniformTime
from harness.workload.files import content_id, read_input, resolve
from harness.workload.lengths import sample_length

#: rng domain of session plans (measured/warmup domains are 2/3; system prompts 8)
SESSION_DOMAIN, SYSTEM_DOMAIN = 5, 8
#: turns beyond this share one per-turn group ("16+"), so a long session cannot grow the histograms without bound
TURN_GROUPS = 16
DEFAULT_BLOCK = 16
_USER = ("human", "user")
_ASSISTANT = ("gpt", "assistant", "chatgpt", "bard", "bing", "model")


@dataclass(frozen=True, slots=True)
class TurnPlan:
    text: str  # the new user message
    tokens: int  # its length
    max_tokens: int
    think_s: float  # pause after this turn's reply, before the next user message


@dataclass(frozen=True, slots=True)
class SessionPlan:
    index: int
    class_name: str
    warmup: bool
    system: str
    system_tokens: int
    system_id: int | None
    turns: tuple[TurnPlan, ...]


@dataclass(frozen=True, slots=True)
class RecordedConversation:
    system: str
    user_turns: tuple[str, ...]
    reply_tokens: tuple[int | None, ...]  # the recorded replies' lengths (max_tokens), None = the class's


def turn_label(turn: int) -> str:
    """Per-turn group of a 1-based turn number."""
    return str(turn) if turn < TURN_GROUPS else f"{TURN_GROUPS}+"


def _lognormal_think(d: LogNormalTime, rng: np.random.Generator) -> float:
    mu = np.log(d.mean) - d.sigma**2 / 2  # the given mean is the distribution's mean
    return float(rng.lognormal(mu, d.sigma))


#: think-time distributions (scenario `think_time_s: {dist: ...}`): one sampler each, by its `dist`;
#: the open-loop arrival of a session's later turn is its previous reply's end plus this draw
THINK_TIMES: dict[str, Callable[[Any, np.random.Generator], float]] = {
    "fixed": lambda d, rng: d.value,
    "uniform": lambda d, rng: float(rng.uniform(d.min, d.max)),
    "exponential": lambda d, rng: float(rng.exponential(d.mean)) if d.mean > 0 else 0.0,
    "lognormal": _lognormal_think,
}


def sample_think(dist: FixedTime | UniformTime | ExponentialTime | LogNormalTime, rng: np.random.Generator) -> float:
    value = THINK_TIMES[dist.dist](dist, rng)
    cap = dist.max if isinstance(dist, (ExponentialTime, LogNormalTime)) else None  # uniform's max is its range
    return min(value, cap) if cap is not None else value


@dataclass(frozen=True)
class ParsedConversation:
    """One JSONL object as read: the system prompt, the user turns and each turn's recorded reply
    text (None where the conversation has none); load_conversations counts the replies."""

    system: str
    user_turns: tuple[str, ...]
    replies: tuple[str | None, ...]


def parse_conversation(obj: Any, where: str) -> ParsedConversation:
    """One JSONL object -> its system prompt and user turns in order; ValueError with a reason."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object")
    system = ""
    users: list[str] = []
    replies: list[str | None] = []
    if isinstance(obj.get("conversations"), list):
        items = [(t.get("from"), t.get("value")) for t in obj["conversations"] if isinstance(t, dict)]
    elif isinstance(obj.get("messages"), list):
        items = [(m.get("role"), m.get("content")) for m in obj["messages"] if isinstance(m, dict)]
    elif isinstance(obj.get("prompt"), str):
        items = [("user", obj["prompt"])]
    else:
        raise ValueError(f"{where}: needs conversations (ShareGPT), messages (chat) or prompt")
    for role, text in items:
        if not isinstance(text, str):
            continue
        if role == "system" and not users:
            system = text
        elif role in _USER and text.strip():
            users.append(text)
            replies.append(None)
        elif role in _ASSISTANT and users and replies[-1] is None:
            replies[-1] = text
    if not users:
        raise ValueError(f"{where}: no user turn with text")
    return ParsedConversation(system, tuple(users), tuple(replies))


def load_conversations(
    path: str, base_dir: Path | None, count: Callable[[str], int]
) -> tuple[str, list[RecordedConversation]]:
    """A JSONL file of recorded conversations -> (content id, conversations); UserError when bad."""
    p = resolve(path, base_dir)
    data = read_input(p, f"session dataset {path}")
    out: list[RecordedConversation] = []
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            conv = parse_conversation(json.loads(line), f"{p}:{n}")
        except RecursionError:
            raise UserError(f"{p}:{n}: nested too deeply to read") from None
        except ValueError as exc:
            raise UserError(str(exc) if str(exc).startswith(str(p)) else f"{p}:{n}: not JSON ({exc})") from None
        # recorded replies give each turn's max_tokens (as the single-turn replay does)
        reply_tokens = tuple(None if r is None else max(1, count(r)) for r in conv.replies)
        out.append(RecordedConversation(conv.system, conv.user_turns, reply_tokens))
    if not out:
        raise UserError(f"session dataset {path}: {p} holds no conversations (one JSON object per line)")
    return content_id(data), out


def plan_session(
    spec: SessionSpec,
    class_name: str,
    seed: int,
    index: int,
    warmup: bool,
    words: Any,
    systems: list[str],
    recorded: list[RecordedConversation] | None,
    count: Callable[[str], int],
    salt: tuple[int, ...] = (),
) -> SessionPlan:
    """The whole plan of session `index` (its words come from `words(rng, n)`, the generator's)."""
    rng = np.random.default_rng([seed, SESSION_DOMAIN, 1 if warmup else 0, index, *salt])
    system, system_tokens, system_id = "", 0, None
    turns: list[TurnPlan] = []
    if recorded is not None:
        assert spec.dataset is not None
        k = (index % len(recorded)) if spec.dataset.order == "sequential" else int(rng.integers(0, len(recorded)))
        if warmup and spec.dataset.order == "sequential":
            k = len(recorded) - 1 - index % len(recorded)
        conv = recorded[k]
        n = len(conv.user_turns) if spec.turns is None else min(len(conv.user_turns), sample_length(spec.turns, rng))
        system = conv.system
        system_tokens = count(system) if system else 0
        for text, reply in zip(conv.user_turns[:n], conv.reply_tokens[:n], strict=True):
            out = (
                reply if reply is not None else (sample_length(spec.output_tokens, rng) if spec.output_tokens else 128)
            )
            turns.append(TurnPlan(text, max(1, count(text)), out, sample_think(spec.think_time_s, rng)))
    else:
        assert spec.turns is not None and spec.user_tokens is not None and spec.output_tokens is not None
        n = sample_length(spec.turns, rng)
        sp = spec.system_prompt
        if sp is not None and rng.random() < sp.fraction:
            system_id = int(rng.integers(0, sp.count))
            system, system_tokens = systems[system_id], sp.tokens
        for _ in range(n):
            u = sample_length(spec.user_tokens, rng)
            out = sample_length(spec.output_tokens, rng)
            think = sample_think(spec.think_time_s, rng)
            turns.append(TurnPlan(words(rng, u), u, out, think))
    return SessionPlan(index, class_name, warmup, system, system_tokens, system_id, tuple(turns))


@dataclass(slots=True)
class Conversation:
    """One session's history as it went: mutated only when a turn's record is interpreted."""

    plan: SessionPlan
    messages: list[dict[str, Any]] = field(default_factory=list)
    turn: int = 0  # 0-based index of the next turn to send
    history_tokens: int = 0  # system + user turns + replies so far (what the next prompt repeats)
    prev_total: int = 0  # the previous turn's prompt + reply tokens (what an engine could have cached)
    started_ns: int | None = None  # turn 1's start (intended time in open loop)
    last_end_ns: int = 0  # the last reply's final chunk
    failed: bool = False
    adapter: str | None = None  # the LoRA adapter every turn asks for
    ended: bool = False  # counted in the session statistics

    def __post_init__(self) -> None:
        if self.plan.system and not self.messages:
            self.messages.append({"role": "system", "content": self.plan.system})
            self.history_tokens = self.plan.system_tokens

    @property
    def turns(self) -> int:
        return len(self.plan.turns)

    @property
    def more(self) -> bool:
        return not self.failed and self.turn < len(self.plan.turns)

    def next_messages(self) -> tuple[tuple[dict[str, Any], ...], str, int, int]:
        """(messages, the same as one text for completions APIs, intended prompt tokens, max_tokens)."""
        t = self.plan.turns[self.turn]
        msgs = (*self.messages, {"role": "user", "content": t.text})
        text = "\n\n".join(m["content"] for m in msgs)
        return msgs, text, self.history_tokens + t.tokens, t.max_tokens

    def turn_number(self) -> int:
        """The 1-based turn number of the next request (its per-turn group)."""
        return self.turn + 1

    def think_after_s(self) -> float:
        """The pause after the turn just answered: a closed-loop user waits it before the next turn."""
        return self.plan.turns[self.turn - 1].think_s

    def next_intended_ns(self) -> int:
        """Open loop: when the next turn should be sent (the last reply's end plus the think time)."""
        return self.last_end_ns + round(self.think_after_s() * 1e9)

    def ideal_cached(self, prompt_tokens: int, system_seen: bool, block: int = DEFAULT_BLOCK) -> int:
        """What a large-enough prefix cache serves of this turn's prompt (whole blocks)."""
        if self.turn > 0:
            reusable = self.prev_total
        elif system_seen:
            reusable = self.plan.system_tokens
        else:
            reusable = 0
        return (max(0, min(reusable, prompt_tokens - 1)) // block) * block

    def complete(self, reply: str, prompt_tokens: int, output_tokens: int, count: Callable[[str], int]) -> None:
        """Append the sent user turn and the reply as streamed back; the next turn repeats both."""
        t = self.plan.turns[self.turn]
        self.messages.append({"role": "user", "content": t.text})
        self.messages.append({"role": "assistant", "content": reply})
        self.history_tokens += t.tokens + (count(reply) if reply else 0)
        self.prev_total = prompt_tokens + output_tokens
        self.turn += 1
