"""Greedy (temperature 0) output: the same text for the same prompt, every run, every config.

A real model's greedy output is a function of the prompt and the weights. The simulator's is a
function of a hash of the prompt's words, so a baseline repeats exactly and two configs can be
compared token by token. Configs that lose precision (`--kv-cache-dtype fp8*`, `--quantization`)
make a controlled share of outputs diverge: with error rate `e` (`--sim-fp8-kv-error`,
`--sim-quant-error`), a prompt's output diverges with probability `e` (drawn from the prompt's
hash, so the same prompts diverge on every run) at a position drawn from an exponential
distribution with a mean of `DIVERGE_MEAN_TOKENS`, and from there on follows another stream, as a
real model's continuation does once one token flipped. With `max_tokens` well above that mean the
share of outputs that differ from the baseline is `e`. Speculative decoding changes only how
many tokens a step emits, never which: it stays lossless.

The simulator "knows" the answers to prompts of three forms, so an expected-answer set scores:
`repeat: w1 w2 ...` (answer: the words), `reverse: ...` (the words reversed) and `sort: ...`
(the words sorted); only words of the simulator's vocabulary count. The answer is followed by
EOS (finish `stop`) unless `ignore_eos`. A divergence inside the answer makes it wrong, so
accuracy falls as the error knob rises (about `e * P(position < answer length)`).

Log-probabilities are derived from the same hashes; a lossy config perturbs them by up to its
error rate, so the mean log-prob difference on agreeing tokens is non-zero too.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import TYPE_CHECKING, Any

from harness.workload.builtin_tokenizer import VOCAB

if TYPE_CHECKING:
    from harness.sim.request import SimRequest

VOCAB_SIZE = len(VOCAB)
_INDEX = {w: i for i, w in enumerate(VOCAB)}
_MASK = (1 << 64) - 1
#: mean position (tokens) of the first divergence of an output that diverges
DIVERGE_MEAN_TOKENS = 4.0

_S_TOKEN, _S_EOS, _S_LP, _S_ALT, _S_DIVERGE, _S_POS = 1, 2, 3, 4, 5, 6


def _mix(x: int) -> int:
    """splitmix64: a fast, well-spread 64-bit hash step."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _h(*parts: int) -> int:
    x = 0
    for p in parts:
        x = _mix(x ^ (p & _MASK))
    return x


def _unit(x: int) -> float:
    return (x >> 11) / float(1 << 53)


def prompt_hash(words: list[str]) -> int:
    """Stable across processes (Python's str hash is salted); C speed for long prompts."""
    return int.from_bytes(hashlib.blake2b(" ".join(words).encode(), digest_size=8).digest(), "little")


def known_answer(words: list[str]) -> list[int] | None:
    """The answer's token ids for prompts of a known form, else None."""
    if not words:
        return None
    head = words[0].lower()
    body = [w for w in words[1:] if w in _INDEX]
    if head == "repeat:":
        out = body
    elif head == "reverse:":
        out = body[::-1]
    elif head == "sort:":
        out = sorted(body)
    else:
        return None
    return [_INDEX[w] for w in out] or None


class GreedyText:
    """One request's greedy token stream: `token(i)`, `stops_after(i)`, `logprob(i)`."""

    __slots__ = (
        "_alt_ids",
        "_alt_rng",
        "_base_ids",
        "_base_rng",
        "alt_seed",
        "answer",
        "diverge_at",
        "lp_noise",
        "seed",
    )

    def __init__(self, words: list[str], errors: tuple[tuple[int, float], ...] = ()) -> None:
        self.seed = prompt_hash(words)
        self.answer = known_answer(words)
        self.diverge_at: int | None = None
        self.alt_seed = 0
        self.lp_noise = sum(rate for _, rate in errors)
        # tokens are asked for in order (0, 1, 2, ...): a seeded Mersenne Twister per stream is
        # ten times cheaper per token than hashing each position
        self._base_ids: list[int] = list(self.answer or ())
        self._base_rng = random.Random(self.seed)
        self._alt_ids: list[int] = []
        self._alt_rng: random.Random | None = None
        for salt, rate in errors:
            if rate > 0 and _unit(_h(self.seed, salt, _S_DIVERGE)) < rate:
                pos = int(-math.log(1.0 - _unit(_h(self.seed, salt, _S_POS))) * DIVERGE_MEAN_TOKENS)
                if self.diverge_at is None or pos < self.diverge_at:
                    self.diverge_at = pos
                    self.alt_seed = _h(self.seed, salt)

    def _base(self, i: int) -> int:
        ids = self._base_ids
        while len(ids) <= i:
            ids.append(int(self._base_rng.random() * VOCAB_SIZE))
        return ids[i]

    def _alt(self, i: int) -> int:
        """The diverged stream; index 0 is the divergence position."""
        if self._alt_rng is None:
            self._alt_rng = random.Random(self.alt_seed)
        ids, k = self._alt_ids, i - (self.diverge_at or 0)
        while len(ids) <= k:
            ids.append(int(self._alt_rng.random() * VOCAB_SIZE))
        return ids[k]

    def _stream(self, i: int) -> int:
        d = self.diverge_at
        return self.seed if d is None or i < d else self.alt_seed

    def token(self, i: int) -> int:
        """The id of output token `i` (0-based)."""
        d = self.diverge_at
        if d is None or i < d:
            return self._base(i)
        t = self._alt(i)
        if i == d and t == self._base(i):
            t = (t + 1) % VOCAB_SIZE  # the divergence point differs by definition
        return t

    def stops_after(self, i: int, eos_prob: float) -> bool:
        """EOS right after token `i` (a known answer ends there; else a hashed draw per position)."""
        a = self.answer
        if a is not None:
            return i + 1 >= len(a)
        return eos_prob > 0 and _unit(_h(self._stream(i), _S_EOS, i)) < eos_prob

    def logprob(self, i: int) -> float:
        u = _unit(_h(self._stream(i), _S_LP, i))
        lp = -0.02 * u if self.answer is not None and i < len(self.answer) else -2.0 * u * u
        if self.lp_noise:
            lp += self.lp_noise * (_unit(_h(self.seed, _S_LP, i, 1)) - 0.5) * 2.0
        return min(0.0, lp)

    def top_logprobs(self, i: int, n: int) -> list[tuple[int, float]]:
        """The chosen token first, then n-1 less likely alternatives."""
        lp = self.logprob(i)
        tok = self.token(i)
        out = [(tok, lp)]
        stream = self._stream(i)
        j = 1
        while len(out) < n:
            alt = _h(stream, _S_ALT, i, j) % VOCAB_SIZE
            if alt != tok and all(alt != t for t, _ in out):
                out.append((alt, lp - 1.0 - j * 0.5 - _unit(_h(stream, _S_ALT, i, j, 1))))
            j += 1
        return out


#: salts of the lossy settings (kept stable: the same prompts diverge on every run)
FP8_KV_SALT = 0xF8
QUANT_SALT = 0x0A


def logprobs_body(req: SimRequest, chat: bool, top_n: int) -> dict[str, Any]:
    """The `logprobs` object of a non-streaming choice, in vLLM's chat or completions shape.
    Tokens are the streamed words (" word"). Sampled (non-greedy) requests get the hash-derived
    values of their prompt's stream: shaped right, meaningless as numbers."""
    g = req.greedy if req.greedy is not None else GreedyText(req.tokens[: req.prompt_len])
    ids = req.out_ids
    if chat:
        content = []
        for i, t in enumerate(ids):
            word = " " + VOCAB[t]
            tops = g.top_logprobs(i, max(1, top_n))[:top_n] if top_n else []
            content.append(
                {
                    "token": word,
                    "logprob": g.logprob(i),
                    "bytes": list(word.encode()),
                    "top_logprobs": [
                        {"token": " " + VOCAB[a], "logprob": lp, "bytes": list((" " + VOCAB[a]).encode())}
                        for a, lp in tops
                    ],
                }
            )
        return {"content": content}
    tokens, lps, tops_out, offsets = [], [], [], []
    offset = 0
    for i, t in enumerate(ids):
        word = " " + VOCAB[t]
        tokens.append(word)
        lps.append(g.logprob(i))
        offsets.append(offset)
        offset += len(word)
        tops_out.append({" " + VOCAB[a]: lp for a, lp in g.top_logprobs(i, max(1, top_n))} if top_n else None)
    return {
        "tokens": tokens,
        "token_logprobs": lps,
        "top_logprobs": tops_out if top_n else None,
        "text_offset": offsets,
    }
