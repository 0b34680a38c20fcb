"""Replay of a trace of hashed prefix blocks (Mooncake's format): prompts that share exactly what
the recorded prompts shared.

Each record holds `timestamp`, `input_length`, `output_length` and `hash_ids`, one id per
`block_tokens`-token block of its prompt (harness.scenario.block_trace). Block id b of pass p is
always the same words (drawn from (seed, p, b)), so two requests whose hash_ids agree on a prefix
send the same tokens for it and the engine's prefix cache sees the trace's reuse; a final partial
block is the start of its block's words. Past the trace's end the replay cycles, each pass with
fresh words (a second pass must not hit the first's cache); warmup uses words of its own.

The ideal hit of a record is what an unbounded prefix cache would serve it: its leading blocks
whose whole prefix an earlier record (in timestamp order) carried, capped at its prompt minus one
token (an engine always computes one) and cut to whole engine blocks. Records sharing a
`session_id` are replayed as one session (`TraceSession`): turn k+1 is sent after turn k ended,
and not before its own (scaled) timestamp.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.scenario.block_trace import BlockTrace
from harness.workload.files import content_id, not_json, read_input, resolve
from harness.workload.sessions import Conversation

_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
MAX_PROBLEMS = 5


@dataclass(frozen=True, slots=True)
class TraceRecord:
    line: int
    at_s: float  # the trace's own clock (seconds)
    delay_s: float | None  # AIPerf: wait this long after the session's previous turn ended
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...]
    ideal_prefix: int  # tokens of its prompt's start an earlier record sent (same blocks, same prefix)


@dataclass(frozen=True)
class BlockTraceFile:
    content_id: str
    block_tokens: int
    sessions: tuple[tuple[TraceRecord, ...], ...]  # by first timestamp; a record without a session alone
    rate: float | None  # sessions per second at the trace's own pace (None: every session at one instant)

    @property
    def records(self) -> int:
        return sum(len(s) for s in self.sessions)

    def ideal_tokens(self, rec: TraceRecord, engine_block: int) -> int:
        hit = min(rec.ideal_prefix, rec.input_tokens - 1)
        return max(0, hit) // engine_block * engine_block

    def ideal_hit_rate(self, engine_block: int) -> float | None:
        """The share of the whole trace's prompt tokens an unbounded prefix cache would serve."""
        prompt = sum(r.input_tokens for s in self.sessions for r in s)
        hit = sum(self.ideal_tokens(r, engine_block) for s in self.sessions for r in s)
        return hit / prompt if prompt else None


def _count(obj: dict[str, Any], key: str, where: str, problems: list[str], required: bool = True) -> int | None:
    v = obj.get(key)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        problems.append(f"{where}: {key} must be a positive whole number of tokens (got {json.dumps(v)[:40]})")
        return None
    return v


def _seconds(obj: dict[str, Any], key: str, unit: str, where: str, problems: list[str]) -> float | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        problems.append(f"{where}: {key} must be a number >= 0 ({unit})")
        return None
    return float(v) * _UNIT[unit]


def parse(text: str, path: Path, block_tokens: int, unit: str) -> BlockTraceFile:
    """The trace's records grouped into sessions; UserError lines naming file:line and the field."""
    problems: list[str] = []
    rows: list[tuple[Any, int, float | None, float | None, int, int, tuple[int, ...]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except RecursionError:
            problems.append(f"{where}: nested too deeply to read")
            obj = None
        except ValueError as exc:
            problems.append(f"{where}: not JSON ({not_json(exc)})")
            obj = None
        if obj is not None and not isinstance(obj, dict):
            problems.append(f"{where}: expected a JSON object with timestamp, input_length, output_length, hash_ids")
            obj = None
        if obj is not None:
            ids = obj.get("hash_ids", [])
            if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                problems.append(f"{where}: hash_ids must be a list of integers (block ids)")
                ids = None
            n_in = _count(obj, "input_length", where, problems)
            n_out = _count(obj, "output_length", where, problems)
            at = _seconds(obj, "timestamp", unit, where, problems)
            delay = _seconds(obj, "delay", unit, where, problems)
            sid = obj.get("session_id")
            if sid is not None and not isinstance(sid, (str, int)):
                problems.append(f"{where}: session_id must be a string or an integer")
            elif ids is not None and n_in is not None and n_out is not None:
                if ids and len(ids) > -(-n_in // block_tokens) + 1:
                    problems.append(
                        f"{where}: {len(ids)} hash_ids for {n_in} tokens: more blocks than "
                        f"{block_tokens}-token blocks the prompt holds (block_trace.block_tokens?)"
                    )
                else:
                    rows.append((sid, n, at, delay, n_in, n_out, tuple(ids)))
        if len(problems) >= MAX_PROBLEMS:
            problems.append(f"{path}: stopped after {MAX_PROBLEMS} bad lines")
            break
    if problems:
        raise UserError(*problems)
    if not rows:
        raise UserError(f"workload block_trace: {path} holds no records (one JSON object per line)")
    # sessions keep their records in file order; a turn without a timestamp follows its previous turn
    grouped: dict[Any, list[list[Any]]] = {}
    for sid, n, at, delay, n_in, n_out, ids in rows:
        key = ("line", n) if sid is None else ("session", sid)
        turns = grouped.setdefault(key, [])
        if at is None:
            if not turns:
                raise UserError(
                    f"{path}:{n}: timestamp required (the first record of a session has no previous turn to follow)"
                )
            at = turns[-1][1] + (delay or 0.0)
        turns.append([n, at, delay, n_in, n_out, ids])
    ideal = _ideal_prefixes(grouped, block_tokens)
    sessions = sorted(
        (
            tuple(TraceRecord(t[0], t[1], t[2], t[3], t[4], t[5], ideal[t[0]]) for t in turns)
            for turns in grouped.values()
        ),
        key=lambda s: (s[0].at_s, s[0].line),
    )
    starts = sorted(s[0].at_s for s in sessions)
    span = starts[-1] - starts[0]
    rate = (len(starts) - 1) / span if len(starts) > 1 and span > 0 else None
    return BlockTraceFile(content_id(text.encode()), block_tokens, tuple(sessions), rate)


def _ideal_prefixes(grouped: dict[Any, list[list[Any]]], block_tokens: int) -> dict[int, int]:
    """Line -> tokens of its prompt's start that an earlier record (timestamp order) sent: an
    unbounded prefix cache. Blocks are keyed by their prefix chain, as engines key KV blocks; a
    block an earlier record sent only the start of (its partial last block) hits that far, no further."""
    order = sorted((t[1], t[0]) for turns in grouped.values() for t in turns)
    by_line = {t[0]: t for turns in grouped.values() for t in turns}
    seen: dict[int, int] = {}  # chain key -> the most tokens of that block an earlier record sent
    out: dict[int, int] = {}
    for _at, n in order:
        _line, _t, _delay, n_in, _out, ids = by_line[n]
        chain, hit, matching, left = 0, 0, True, n_in
        sent: list[tuple[int, int]] = []
        for hid in ids:
            k = min(left, block_tokens)
            if k <= 0:
                break
            left -= k
            chain = hash((chain, hid))
            if matching:
                got = seen.get(chain, 0)
                hit += min(got, k)
                matching = got >= k
            sent.append((chain, k))
        out[n] = hit
        for key, k in sent:
            if k > seen.get(key, 0):
                seen[key] = k
    return out


@functools.lru_cache(maxsize=8)
def _load(path: Path, mtime_ns: int, block_tokens: int, unit: str) -> BlockTraceFile:
    text = read_input(path, "workload block_trace.path").decode("utf-8", errors="replace")
    return parse(text, path, block_tokens, unit)


def load(spec: BlockTrace, base_dir: Path | None) -> BlockTraceFile:
    p = resolve(spec.path, base_dir)
    try:
        mtime = p.stat().st_mtime_ns
    except OSError as exc:
        raise UserError(
            f"workload block_trace.path {spec.path}: cannot read {p} ({exc.strerror}); paths are relative "
            "to the scenario file"
        ) from None
    return _load(p, mtime, spec.block_tokens, spec.unit)


@dataclass(slots=True)
class TraceSession(Conversation):
    """A recorded session's turns: each prompt is its record's blocks (the trace says what history
    it repeats), sent after the previous turn ended and not before its own scaled timestamp."""

    records: tuple[TraceRecord, ...] = ()
    build: Callable[[TraceRecord], str] | None = None  # the prompt text of a record
    ideal: Callable[[TraceRecord], int] | None = None  # its ideal cached tokens
    scale: float = 1.0  # replay seconds per trace second (open loop at load.rate)

    def next_messages(self) -> tuple[tuple[dict[str, str], ...], str, int, int]:
        rec = self.records[self.turn]
        assert self.build is not None
        text = self.build(rec)
        return ({"role": "user", "content": text},), text, rec.input_tokens, rec.output_tokens

    def ideal_cached(self, prompt_tokens: int, system_seen: bool, block: int = 16) -> int:
        assert self.ideal is not None
        return self.ideal(self.records[self.turn])

    def complete(self, reply: str, prompt_tokens: int, output_tokens: int, count: Callable[[str], int]) -> None:
        self.prev_total = prompt_tokens + output_tokens
        self.turn += 1  # the next prompt comes from the trace, not from this reply

    def think_after_s(self) -> float:
        """Closed loop: the recorded delay before the next turn, if the trace gives one."""
        nxt = self.records[self.turn] if self.turn < len(self.records) else None
        return (nxt.delay_s or 0.0) if nxt is not None else 0.0

    def next_intended_ns(self) -> int:
        nxt = self.records[self.turn]
        if nxt.delay_s is not None:
            return self.last_end_ns + round(nxt.delay_s * self.scale * 1e9)
        due = (self.started_ns or 0) + round((nxt.at_s - self.records[0].at_s) * self.scale * 1e9)
        return max(self.last_end_ns, due)
