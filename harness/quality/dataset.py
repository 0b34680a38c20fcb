"""Quality prompts from a JSONL file: what to ask, and optionally the answer that counts as right.

One JSON object per line (blank lines skipped), in file order (the order requests are sent):
  {"prompt": "..."}                                  sent to /v1/completions
  {"messages": [{"role": "user", "content": "..."}]} sent to /v1/chat/completions
optional on either:
  "id": "..."          a stable name (default: the line number)
  "expected": "..." or ["...", ...]   right answers (any one counts)
  "match": "exact" | "contains" | "regex" | "choice"   how an output is judged (default exact)
  "max_tokens": N      this prompt's output budget (default: the quality block's max_tokens)
A bad file is one `UserError` naming the file, the line and the fix (the CLI exits 2).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.quality.matching import MATCHERS
from harness.workload.files import content_id, not_json, read_input, resolve

_KEYS = {"id", "prompt", "messages", "expected", "match", "max_tokens"}


@dataclass(frozen=True, slots=True)
class QualityPrompt:
    id: str
    prompt: str | None  # completions text
    messages: tuple[dict[str, str], ...] | None  # chat messages
    expected: tuple[str, ...] | None  # right answers; None = not scored for accuracy
    match: str  # a key of harness.quality.matching.MATCHERS
    max_tokens: int | None

    @property
    def chat(self) -> bool:
        return self.messages is not None


@dataclass(frozen=True)
class QualitySet:
    path: Path
    sha256: str  # content hash: two quality runs compare only on the same prompts
    prompts: list[QualityPrompt]

    @property
    def with_expected(self) -> int:
        return sum(1 for p in self.prompts if p.expected is not None)


def _record(obj: Any, line: int) -> QualityPrompt:
    if not isinstance(obj, dict):
        raise ValueError("each line must be a JSON object")
    unknown = sorted(set(obj) - _KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}; allowed: {', '.join(sorted(_KEYS))}")
    has_prompt, has_messages = "prompt" in obj, "messages" in obj
    if has_prompt == has_messages:
        raise ValueError('give exactly one of "prompt" (text) or "messages" (a chat)')
    prompt = messages = None
    if has_prompt:
        if not isinstance(obj["prompt"], str) or not obj["prompt"].strip():
            raise ValueError('"prompt" must be a non-empty string')
        prompt = obj["prompt"]
    else:
        raw = obj["messages"]
        if (
            not isinstance(raw, list)
            or not raw
            or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in raw
            )
        ):
            raise ValueError('"messages" must be a non-empty list of {"role": str, "content": str}')
        messages = tuple({"role": m["role"], "content": m["content"]} for m in raw)
    expected = obj.get("expected")
    if expected is not None:
        if isinstance(expected, str):
            expected = [expected]
        if not isinstance(expected, list) or not expected or not all(isinstance(e, str) for e in expected):
            raise ValueError('"expected" must be a string or a non-empty list of strings')
        expected = tuple(expected)
    match = obj.get("match", "exact")
    if match not in MATCHERS:
        raise ValueError(f'"match" {match!r} is not one of {", ".join(MATCHERS)}')
    if "match" in obj and expected is None:
        raise ValueError('"match" without "expected": add the right answer, or remove match')
    if match == "regex":
        for e in expected or ():
            try:
                re.compile(e)
            except re.error as exc:
                raise ValueError(f'"expected" {e!r} is not a valid regex ({exc})') from None
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise ValueError('"max_tokens" must be a whole number >= 1')
    rid = obj.get("id", str(line))
    if not isinstance(rid, (str, int)) or isinstance(rid, bool) or not str(rid):
        raise ValueError('"id" must be a non-empty string or number')
    return QualityPrompt(
        id=str(rid), prompt=prompt, messages=messages, expected=expected, match=match, max_tokens=max_tokens
    )


def parse_quality_set(data: bytes, path: Path) -> QualitySet:
    prompts: list[QualityPrompt] = []
    seen: dict[str, int] = {}
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise UserError(f"quality.prompts {path}: not UTF-8 text; give a JSONL file") from None
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError, or a number past Python's int digit limit
            raise UserError(
                f"quality.prompts {path}:{n}: not JSON ({not_json(exc)}); one JSON object per line"
            ) from None
        except RecursionError:
            raise UserError(
                f"quality.prompts {path}:{n}: nested too deeply to read; one JSON object per line"
            ) from None
        try:
            rec = _record(obj, n)
        except ValueError as exc:
            raise UserError(f"quality.prompts {path}:{n}: {exc}") from None
        if rec.id in seen:
            raise UserError(
                f"quality.prompts {path}:{n}: id {rec.id!r} already used on line {seen[rec.id]}; ids must be unique"
            )
        seen[rec.id] = n
        prompts.append(rec)
    if not prompts:
        raise UserError(f"quality.prompts {path}: no prompts; add one JSON object per line")
    return QualitySet(path=path, sha256=content_id(data), prompts=prompts)


def load_quality_set(path: str, base_dir: Path | None) -> QualitySet:
    """Read and check the prompts file (`path` relative to the scenario/sweep file's folder)."""
    p = resolve(path, base_dir)
    data = read_input(p, f"quality.prompts {path}", "paths are relative to the file that names them")
    return parse_quality_set(data, p)
