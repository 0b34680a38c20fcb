"""The `quality:` block of a scenario, sweep or tune file: which prompts, how long, against what.

Output quality is checked beside speed: the same prompts, sent greedily (temperature 0, fixed
seed, file order) to every config, scored against a baseline config's outputs and against the
expected answers the file gives. The logic lives in `harness.quality`; this is the file format.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness import limits
from harness.scenario.parts import within


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True)


class QualityGate(_Strict):
    """A config passes when every limit that is set holds (a limit that is not set is not judged)."""

    min_exact_agreement: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None, description="share of prompts whose output equals the baseline's token for token"
    )
    max_kl: Annotated[float, Field(ge=0)] | None = Field(
        default=None,
        description="largest mean per-token KL divergence (nats) of the candidate's next-token distribution "
        "from the baseline's, at every position where both had seen the same text (the first differing one "
        "included; from top_logprobs, which must be >= 5): judges numeric drift (FP8 KV, quantization) on "
        "its size where exact agreement fails on any flipped near-tie, e.g. batch shapes on a random-weight model",
    )
    max_accuracy_drop: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None,
        description="largest accepted fall of expected-answer accuracy vs the baseline "
        "(a fraction: 0.01 = one point), judged beyond the noise of the prompt count",
    )


class QualitySpec(_Strict):
    prompts: Annotated[str, Field(min_length=1)] = Field(
        description='JSONL, relative to the file: {"prompt"} or {"messages"}, optional "expected" '
        '(string or list) and "match" (exact|contains|regex|choice)'
    )
    max_tokens: Annotated[int, Field(gt=0), within(limits.TOKENS)] = 128  # 1e12 failed every prompt at the server
    baseline: Annotated[str, Field(min_length=1)] | None = Field(
        default=None,
        description="sweeps/tune: the config whose outputs are the reference (default: base, else the first)",
    )
    gate: QualityGate = Field(default_factory=QualityGate)
    seed: int = Field(default=0, description="sent with every request (greedy decoding ignores it on most engines)")
    logprobs: bool = Field(
        default=True, description="ask for per-token log-probs (retried without when the server refuses)"
    )
    top_logprobs: Annotated[int, Field(ge=0, le=20)] = 0
    timeout_s: Annotated[float, Field(gt=0)] = 300.0
    confidence: Annotated[float, Field(ge=0.5, lt=1)] = 0.95

    @model_validator(mode="after")
    def _kl_needs_top_logprobs(self) -> QualitySpec:
        if self.gate.max_kl is not None and (self.top_logprobs < 5 or not self.logprobs):
            raise ValueError(
                f"gate.max_kl needs the distributions: set top_logprobs to 5-20 (is {self.top_logprobs})"
                + ("" if self.logprobs else " and logprobs: true")
            )
        return self
