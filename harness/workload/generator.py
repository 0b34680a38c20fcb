"""Deterministic request generation: request i is a pure function of (seed, i).

Measured requests use index domain 2, warmup requests domain 3, so the measured work is the same
whatever the warmup did, and any worker can build any request without talking to the others.
Prompts are pseudo-words (the built-in tokenizer's vocabulary): with the built-in tokenizer a
prompt of N words is exactly N tokens; with a model tokenizer the text is cut to N tokens.
Each request's own text starts with words drawn for that request, so two requests share KV
blocks only through a declared shared prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.scenario.models import RequestClass, Scenario
from harness.workload.builtin_tokenizer import VOCAB, BuiltinTokenizer
from harness.workload.lengths import mean_length, sample_length
from harness.workload.tokenizers import HFTokenizer

MEASURED, WARMUP = 2, 3
_VOCAB_ARRAY = np.array(VOCAB)


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    index: int
    class_name: str
    prefix: str
    text: str
    input_tokens: int  # intended prompt length, prefix included
    output_tokens: int  # max_tokens
    prefix_id: int | None
    warmup: bool = False


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(_VOCAB_ARRAY[rng.integers(0, len(VOCAB), n)])


class WorkloadGenerator:
    def __init__(self, scenario: Scenario, tokenizer: BuiltinTokenizer | HFTokenizer | None = None) -> None:
        self.scenario = scenario
        self.seed = scenario.seed
        self.tokenizer = tokenizer or BuiltinTokenizer()
        self.classes = scenario.workload.classes
        weights = np.array([c.weight for c in self.classes], dtype=float)
        self._cum = np.cumsum(weights / weights.sum())
        self._prefixes: dict[str, list[str]] = {}
        for ci, cls in enumerate(self.classes):
            sp = cls.shared_prefix
            if sp is not None:
                self._prefixes[cls.name] = [
                    self._fit(_words(np.random.default_rng([self.seed, 4, ci, j]), sp.tokens), sp.tokens)
                    for j in range(sp.count)
                ]

    def _fit(self, text: str, tokens: int) -> str:
        if isinstance(self.tokenizer, HFTokenizer):
            return self.tokenizer.fit(text, tokens)
        return text

    def request(self, index: int, warmup: bool = False) -> PlannedRequest:
        rng = np.random.default_rng([self.seed, WARMUP if warmup else MEASURED, index])
        ci = int(np.searchsorted(self._cum, rng.random(), side="right"))
        cls: RequestClass = self.classes[min(ci, len(self.classes) - 1)]
        n_in = sample_length(cls.input_tokens, rng)
        n_out = sample_length(cls.output_tokens, rng)
        prefix, prefix_id = "", None
        sp = cls.shared_prefix
        if sp is not None and rng.random() < sp.fraction:
            prefix_id = int(rng.integers(0, sp.count))
            prefix = self._prefixes[cls.name][prefix_id]
            own = max(n_in - sp.tokens, 1)
            n_in = sp.tokens + own
        else:
            own = n_in
        text = self._fit(_words(rng, own), own)
        return PlannedRequest(index, cls.name, prefix, text, n_in, n_out, prefix_id, warmup)


def expected_prefix_hit_rate(scenario: Scenario, block_size: int = 16) -> float | None:
    """Expected fraction of prompt tokens served from the prefix cache in steady state.

    Counts only full blocks of the shared prefix (engines cache whole blocks) and ignores the
    first occurrence of each prefix. None when the scenario declares no shared prefix.
    """
    classes = scenario.workload.classes
    if not any(c.shared_prefix for c in classes):
        return None
    total_w = sum(c.weight for c in classes)
    cached = prompt = 0.0
    for cls in classes:
        w = cls.weight / total_w
        mean_in = mean_length(cls.input_tokens)
        sp = cls.shared_prefix
        if sp is None:
            prompt += w * mean_in
            continue
        with_prefix = sp.tokens + max(mean_in - sp.tokens, 1)
        prompt += w * (sp.fraction * with_prefix + (1 - sp.fraction) * mean_in)
        cached += w * sp.fraction * (sp.tokens // block_size) * block_size
    return cached / prompt if prompt else None
