"""The `quality:` block of a scenario, sweep or tune file: which prompts, how long, against what.

Output quality is checked beside speed: the same prompts, sent greedily (temperature 0, fixed
seed, file order) to every config, scored against a baseline config's outputs and against the
expected answers the file gives. The logic lives in `harness.quality`; this is the file format.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from harness import limits
from harness.scenario.parts import within


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True)


class QualityGate(_Strict):
    """A config passes when every limit that is set holds (a limit that is not set is not judged)."""

    min_exact_agreement: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None, description="share of prompts whose output equals the baseline's token for token"
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
