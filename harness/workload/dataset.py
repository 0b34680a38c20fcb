"""Prompts from a JSONL file: a production log or a ShareGPT export, replayed as the class's work.

Read once per process (the runner reads it first, so a bad file is a one-line error before any
load starts); each record's prompt length is counted with the run's tokenizer, so the usage
check compares the server's counts with these. The file's content hash enters the fingerprint:
two runs compare only when they replayed the same prompts.

Formats, one JSON object per line (blank lines skipped):
  {"prompt": "..."}                                   completions-style text
  {"messages": [{"role": "user", "content": "..."}]}  a chat (system, earlier turns included)
  {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}
                                                      ShareGPT: the first user turn is the prompt,
                                                      the reply's token count the output length
plus an optional "output_tokens": N on any of them (max_tokens; wins over a ShareGPT reply).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import limits
from harness.errors import UserError
from harness.workload.files import content_id, not_json, read_input, resolve

MAX_PROBLEMS = 5
_USER = ("human", "user")
_ASSISTANT = ("gpt", "assistant", "chatgpt", "bard", "bing")


@dataclass(frozen=True, slots=True)
class DatasetRecord:
    text: str  # the prompt as one text (messages joined): what completions send and what is counted
    messages: tuple[dict[str, str], ...] | None  # chat messages, when the record has them
    input_tokens: int
    output_tokens: int | None  # from the record; None = the class's output_tokens


@dataclass(frozen=True)
class LoadedDataset:
    path: Path
    sha256: str
    records: list[DatasetRecord]


def _messages(raw: Any, where: str) -> tuple[dict[str, str], ...]:
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: messages must be a non-empty list of {{role, content}}")
    out = []
    for m in raw:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ValueError(f"{where}: each message needs a string role and content")
        out.append({"role": m["role"], "content": m["content"]})
    return tuple(out)


def parse_record(obj: Any, count: Callable[[str], int], where: str) -> DatasetRecord:
    """One line's object -> a record; ValueError with a one-line reason."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object")
    out_tokens = obj.get("output_tokens")
    if out_tokens is not None and (not isinstance(out_tokens, int) or isinstance(out_tokens, bool) or out_tokens < 1):
        raise ValueError(f"{where}: output_tokens must be a whole number >= 1")
    if out_tokens is not None and limits.TOKENS.check(out_tokens):
        raise ValueError(f"{where}: output_tokens: {limits.TOKENS.check(out_tokens)}")
    messages = None
    if isinstance(obj.get("prompt"), str):
        text = obj["prompt"]
    elif "messages" in obj:
        messages = _messages(obj["messages"], where)
        text = "\n\n".join(m["content"] for m in messages)
    elif "conversations" in obj:
        turns = obj["conversations"]
        if not isinstance(turns, list):
            raise ValueError(f"{where}: conversations must be a list of {{from, value}}")
        first = next((i for i, t in enumerate(turns) if isinstance(t, dict) and t.get("from") in _USER), None)
        if first is None or not isinstance(turns[first].get("value"), str):
            raise ValueError(f"{where}: no user turn (from: human) with a string value")
        text = turns[first]["value"]
        reply = turns[first + 1] if first + 1 < len(turns) else None
        if (
            out_tokens is None
            and isinstance(reply, dict)
            and reply.get("from") in _ASSISTANT
            and isinstance(reply.get("value"), str)
        ):
            out_tokens = max(1, count(reply["value"]))
    else:
        raise ValueError(f"{where}: needs prompt (text), messages (chat) or conversations (ShareGPT)")
    if not text.strip():
        raise ValueError(f"{where}: empty prompt")
    # the token bound of every other length (audit R10: a 200 MB prompt was counted for a minute and
    # sent); a prompt of more than 16 characters per allowed token is refused without counting
    if len(text) > 16 * limits.TOKENS.value:
        raise ValueError(
            f"{where}: the prompt has {len(text):,} characters, far above the limit of "
            f"{limits.TOKENS.value:,} tokens in one request (set {limits.TOKENS.env}=N to raise it)"
        )
    in_tokens = max(1, count(text))
    problem = limits.TOKENS.check(in_tokens + (out_tokens or 0))
    if problem:
        raise ValueError(f"{where}: the prompt and its output: {problem}")
    return DatasetRecord(text, messages, in_tokens, out_tokens)


def load_dataset(path: str, base_dir: Path | None, tokenizer: Any) -> LoadedDataset:
    p = resolve(path, base_dir)
    data = read_input(p, f"workload dataset {path}")
    records: list[DatasetRecord] = []
    problems: list[str] = []
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{p}:{n}"
        try:
            obj = json.loads(line)
        except RecursionError:
            problems.append(f"{where}: nested too deeply to read")
        except ValueError as exc:
            problems.append(f"{where}: not JSON ({not_json(exc)})")
        else:
            try:
                records.append(parse_record(obj, tokenizer.count, where))
            except ValueError as exc:
                problems.append(str(exc))
        if len(problems) >= MAX_PROBLEMS:
            problems.append(f"{p}: stopped after {MAX_PROBLEMS} bad lines; fix them and run again")
            break
    if problems:
        raise UserError(*problems)
    if not records:
        raise UserError(f"workload dataset {path}: {p} holds no records (one JSON object per line)")
    return LoadedDataset(p, content_id(data), records)
