"""The built-in tokenizer: one token per whitespace-separated word.

The simulated engine counts tokens the same way, so with no model tokenizer at hand prompts still
hit their exact token targets and the server's `usage` agrees with the intended lengths.
Generated words come from a fixed vocabulary of short lowercase pseudo-words.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

_CONSONANTS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"

#: 1,620 distinct pseudo-words ("bab", "bac", ... ), stable across versions: prompts depend on it.
VOCAB: tuple[str, ...] = tuple(c1 + v + c2 for c1, v, c2 in itertools.product(_CONSONANTS, _VOWELS, _CONSONANTS))


class BuiltinTokenizer:
    """Word-count tokenizer shared by the workload generator and the simulated engine."""

    id = "builtin-words-v1"
    vocab_size = len(VOCAB)

    def count(self, text: str) -> int:
        return len(text.split())

    def decode_ids(self, ids: Iterable[int]) -> str:
        vocab = VOCAB
        return " ".join(vocab[i] for i in ids)

    def encode_ids(self, text: str) -> list[int]:
        index = _INDEX
        return [index.get(w, 0) for w in text.split()]


_INDEX = {w: i for i, w in enumerate(VOCAB)}
