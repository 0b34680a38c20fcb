"""Tokenizers that size prompts: the built-in word tokenizer or a local model tokenizer.

A model tokenizer is a `tokenizer.json` (or a directory holding one), loaded with the
`tokenizers` library; nothing is fetched from a hub.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

from harness.errors import UserError
from harness.workload.builtin_tokenizer import BuiltinTokenizer
from harness.workload.files import read_input


class Tokenizer(Protocol):
    id: str

    def count(self, text: str) -> int: ...


class HFTokenizer:
    """A local Hugging Face `tokenizers` tokenizer; id = hash of its tokenizer.json."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as _Tok

        data = read_input(path, "workload.tokenizer")  # a device or a huge file is one line, not a hang
        self._tok = _Tok.from_str(data.decode("utf-8", errors="replace"))
        self.id = "hf-" + hashlib.sha256(data).hexdigest()[:16]

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def fit(self, text: str, tokens: int) -> str:
        """Cut `text` to exactly `tokens` tokens (as near as a decode/encode round trip allows)."""
        ids = self._tok.encode(text, add_special_tokens=False).ids[:tokens]
        out = self._tok.decode(ids)
        for _ in range(3):
            n = self.count(out)
            if n == tokens:
                break
            ids = self._tok.encode(out, add_special_tokens=False).ids[:tokens]
            out = self._tok.decode(ids)
        return out


def load_tokenizer(spec: str | None, base_dir: Path | None = None) -> BuiltinTokenizer | HFTokenizer:
    if not spec or spec == "builtin":
        return BuiltinTokenizer()
    path = Path(spec)
    if not path.is_absolute() and base_dir is not None and not path.exists():
        path = base_dir / path
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise UserError(
            f"workload.tokenizer: {spec} has no tokenizer.json; give a tokenizer.json file or a "
            "directory holding one, or remove the key to use the built-in tokenizer"
        )
    try:
        return HFTokenizer(path)
    except Exception as exc:  # any parse failure is the user's file
        raise UserError(f"workload.tokenizer: cannot load {path}: {exc}") from None
