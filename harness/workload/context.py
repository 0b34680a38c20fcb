"""The longest request a workload can send: the context length a server must accept for it.

Computed from the same lengths and rules the generator builds prompts with
(harness.workload.generator, harness.workload.sessions), so what `harness tune` sets as
`--max-model-len` and what `harness run` checks against a target's limit cover the whole
request: a class's `input_tokens` is the whole prompt, its shared prefix included (a prompt is
never shorter than the prefix plus one token of its own); a session's last turn repeats the
system prompt and every earlier turn and reply; a dataset's prompts have the lengths its records
have. Plus the output (max_tokens), plus a few tokens of chat template per message (the
template's role markers are counted by the server, not by the workload).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.scenario.models import Fixed, LengthDist, RequestClass, Scenario

#: tokens a server's chat template adds per message (role markers, BOS): a margin, not a count
TEMPLATE_TOKENS = {"openai-chat": 16, "openai-completions": 2}


def upper(dist: LengthDist | None) -> int | None:
    """The longest length a distribution can draw: fixed and uniform always; normal/lognormal
    only when they set `max` (an unbounded tail has no longest)."""
    if dist is None:
        return None
    return dist.value if isinstance(dist, Fixed) else dist.max


@dataclass(frozen=True)
class ClassLength:
    name: str
    prompt: int | None  # longest prompt in tokens (None: unbounded)
    output: int | None  # longest max_tokens
    messages: int  # chat messages in that longest prompt
    how: str  # the parts, in words

    @property
    def total(self) -> int | None:
        return None if self.prompt is None or self.output is None else self.prompt + self.output


def plain_class(cls: RequestClass) -> ClassLength:
    """A class of generated prompts: input_tokens (the shared prefix included) + output_tokens."""
    n_in, n_out = upper(cls.input_tokens), upper(cls.output_tokens)
    how = f"input_tokens up to {n_in}"
    sp = cls.shared_prefix
    if sp is not None and n_in is not None and sp.tokens + 1 > n_in:
        n_in = sp.tokens + 1  # the generator's rule: the prefix, then at least one token of the request's own
        how = f"the {sp.tokens}-token shared prefix + 1"
    elif sp is not None:
        how += f" (its {sp.tokens}-token shared prefix included)"
    return ClassLength(cls.name, n_in, n_out, 1, f"{how} + output up to {n_out}")


def session_class(cls: RequestClass, count: Callable[[str], int], base_dir: Path | None) -> ClassLength:
    """A multi-turn class: the last turn's prompt repeats the system prompt and every earlier turn
    and reply, then asks for one more reply."""
    from harness.workload.sessions import load_conversations

    spec = cls.session
    assert spec is not None
    if spec.dataset is not None:
        _sha, convs = load_conversations(spec.dataset.path, base_dir, count)
        t_max = upper(spec.turns) if spec.turns is not None else None
        out_max = upper(spec.output_tokens) if spec.output_tokens is not None else 128
        best = (0, 0, 0)
        for c in convs:
            n = len(c.user_turns) if t_max is None else min(len(c.user_turns), t_max)
            replies: list[int] = []
            for recorded in c.reply_tokens[:n]:
                reply = recorded if recorded is not None else out_max
                if reply is None:
                    return ClassLength(cls.name, None, None, 0, "session replies without a bounded output_tokens")
                replies.append(reply)
            prompt = (
                (count(c.system) if c.system else 0)
                + sum(max(1, count(u)) for u in c.user_turns[:n])
                + sum(replies[:-1])
            )
            if prompt + replies[-1] > best[0] + best[1]:
                best = (prompt, replies[-1], 2 * n + (1 if c.system else 0))
        return ClassLength(
            cls.name,
            best[0],
            best[1],
            best[2],
            f"the longest recorded conversation ({spec.dataset.path}): "
            "system prompt + every turn and reply before the last + its reply",
        )
    turns, user, out = upper(spec.turns), upper(spec.user_tokens), upper(spec.output_tokens)
    if turns is None or user is None or out is None:
        return ClassLength(
            cls.name, None, None, 0, "a session length without a maximum (turns, user_tokens or output_tokens)"
        )
    system = spec.system_prompt.tokens if spec.system_prompt is not None else 0
    prompt = system + turns * user + (turns - 1) * out
    how = (
        f"{turns} turns: "
        + (f"the {system}-token system prompt + " if system else "")
        + f"{turns} user messages of up to {user} + {turns - 1} replies of up to {out}, then a reply of up to {out}"
    )
    return ClassLength(cls.name, prompt, out, 2 * turns + (1 if system else 0), how)


def dataset_class(cls: RequestClass, generator: Any) -> ClassLength:
    """A class replaying a dataset: its longest record's prompt + that record's output."""
    records = generator.datasets[cls.name].records
    out_default = upper(cls.output_tokens)
    best: tuple[int, int | None, int] = (0, 0, 1)
    for r in records:
        o = r.output_tokens if r.output_tokens is not None else out_default
        if o is None:
            return ClassLength(
                cls.name,
                None,
                None,
                1,
                "dataset records without output_tokens and a class output_tokens without a maximum",
            )
        if r.input_tokens + o > best[0] + (best[1] or 0):
            best = (r.input_tokens, o, len(r.messages) if r.messages else 1)
    return ClassLength(
        cls.name, best[0], best[1], best[2], f"the longest record of {cls.dataset.path if cls.dataset else '?'}"
    )


def class_lengths(scenario: Scenario, base_dir: Path | None = None, tokenizer: Any = None) -> list[ClassLength]:
    """Every class's longest request, counted in the workload's tokenizer (datasets and recorded
    conversations are read; a bad file raises the generator's one-line UserError)."""
    out: list[ClassLength] = []
    generator = None
    for cls in scenario.workload.classes:
        if cls.session is not None:
            count = tokenizer.count if tokenizer is not None else _builtin_count
            out.append(session_class(cls, count, base_dir))
        elif cls.dataset is not None:
            if generator is None:
                from harness.workload.generator import WorkloadGenerator
                from harness.workload.tokenizers import load_tokenizer

                generator = WorkloadGenerator(
                    scenario, tokenizer or load_tokenizer(scenario.workload.tokenizer, base_dir), base_dir
                )
            out.append(dataset_class(cls, generator))
        else:
            out.append(plain_class(cls))
    return out


def _builtin_count(text: str) -> int:
    from harness.workload.builtin_tokenizer import BuiltinTokenizer

    return BuiltinTokenizer().count(text)


def required_context(scenarios: list[Scenario], base_dirs: list[Path | None] | None = None) -> tuple[int | None, str]:
    """(tokens, how) of the longest request over every class of every scenario, chat template
    margin included; (None, why) when some length has no maximum."""
    best: tuple[int, str] = (0, "")
    for i, sc in enumerate(scenarios):
        base = base_dirs[i] if base_dirs else None
        margin = TEMPLATE_TOKENS.get(sc.target.api, 16)
        for c in class_lengths(sc, base):
            if c.total is None:
                return None, f"{sc.name} class {c.name}: {c.how}"
            total = c.total + margin * c.messages
            if total > best[0]:
                best = (total, f"{sc.name} class {c.name}: {c.how}, + {margin * c.messages} for the chat template")
    return (best[0] or None), best[1]
