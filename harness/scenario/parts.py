"""The building blocks of the scenario's models: the strict base model, bounds from harness.limits,
length distributions, shared prefixes and datasets.

They sit apart from harness.scenario.models because the session and block-trace models use them
and harness.scenario.models uses those in turn (one module each, no import cycle).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from harness import limits


def within(limit: limits.Limit) -> AfterValidator:
    """A bound from harness.limits, raisable by its environment variable."""

    def check(value: Any) -> Any:
        problem = None if value is None else limit.check(value)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


_within = within


Tokens = Annotated[int, Field(gt=0), _within(limits.TOKENS)]


class Strict(BaseModel):
    # strict: no silent coercion of YAML values (`concurrency: true` is not 1, `"4"` is not 4)
    # allow_inf_nan: `.inf`/`.nan` pass `gt=0` checks and break the load later (a weight of inf
    # divides to NaN, a rate of inf schedules everything at once)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)


# ---------------------------------------------------------------- length distributions
class Fixed(Strict):
    dist: Literal["fixed"] = "fixed"
    value: Tokens


class Uniform(Strict):
    dist: Literal["uniform"]
    min: Annotated[int, Field(gt=0)]
    max: Tokens

    @model_validator(mode="after")
    def _order(self) -> Uniform:
        if self.max < self.min:
            raise ValueError("max must be >= min")
        return self


def _min_max(dist: Any) -> Any:
    """min > max would clamp every sample to max: an error, as for uniform."""
    if dist.max is not None and dist.max < dist.min:
        raise ValueError(f"max must be >= min (min {dist.min}, max {dist.max})")
    return dist


class Normal(Strict):
    dist: Literal["normal"]
    mean: Annotated[float, Field(gt=0), _within(limits.TOKENS)]
    std: Annotated[float, Field(ge=0)]
    min: Annotated[int, Field(gt=0)] = 1
    max: Tokens | None = None

    _order = model_validator(mode="after")(_min_max)


class LogNormal(Strict):
    """Log-normal with the given mean (tokens) and sigma of the underlying normal."""

    dist: Literal["lognormal"]
    mean: Annotated[float, Field(gt=0), _within(limits.TOKENS)]
    sigma: Annotated[float, Field(ge=0)] = 0.5
    min: Annotated[int, Field(gt=0)] = 1
    max: Tokens | None = None

    _order = model_validator(mode="after")(_min_max)


LengthDist = Annotated[Fixed | Uniform | Normal | LogNormal, Field(discriminator="dist")]


def length_shorthand(value: Any) -> Any:
    """`input_tokens: 512` means a fixed length."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"dist": "fixed", "value": value}
    if isinstance(value, dict) and "dist" not in value and "value" in value:
        return {"dist": "fixed", **value}
    return value


class SharedPrefix(Strict):
    """A prefix many requests share: a system prompt, few-shot block or document."""

    tokens: Tokens
    count: Annotated[int, Field(gt=0)] = 1
    fraction: Annotated[float, Field(ge=0, le=1)] = 1.0

    @model_validator(mode="after")
    def _generated_ahead(self) -> SharedPrefix:
        """Every prefix's words are generated before the run: bound their total."""
        problem = limits.PREFIX_TOKENS.check(self.count * self.tokens)
        if problem:
            raise ValueError(f"count x tokens: {problem}")
        return self


class Dataset(Strict):
    """Prompts taken from a JSONL file (production logs, ShareGPT exports) instead of generated.

    One JSON object per line: `{"prompt": "..."}`, `{"messages": [{"role", "content"}, ...]}` or
    ShareGPT's `{"conversations": [{"from": "human", "value"}, {"from": "gpt", "value"}, ...]}`
    (the first user turn is the prompt, the answer's token count its output length); optional
    `"output_tokens": N` (max_tokens) on any of them.
    """

    path: Annotated[str, Field(min_length=1)] = Field(description="JSONL file, relative to the scenario file")
    order: Literal["random", "sequential"] = Field(
        default="random",
        description="random: records drawn with replacement from the seed; sequential: in file order, cycling",
    )
