"""The `session:` block of a request class: simulated users holding multi-turn conversations.

Chat traffic is conversations whose history grows turn by turn; that growth is what makes an
engine's prefix cache pay. A session class sends, at turn k, the whole conversation so far
(system prompt, earlier user turns and the assistant's replies exactly as they streamed back)
plus a new user message, waits a think time, and starts a new session when one ends. The plan
(turn count, user lengths, max_tokens, think times) is a pure function of (seed, session index);
the replies come from the server, so the results record the history lengths actually sent.
`dataset` replays recorded conversations instead (the user turns in order, replies from the server).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.scenario.parts import Dataset, Fixed, LengthDist, SharedPrefix, length_shorthand


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)


Secs = Annotated[float, Field(ge=0, le=86400)]


class FixedTime(_Strict):
    dist: Literal["fixed"] = "fixed"
    value: Secs


class UniformTime(_Strict):
    dist: Literal["uniform"]
    min: Secs
    max: Secs

    @model_validator(mode="after")
    def _order(self) -> UniformTime:
        if self.max < self.min:
            raise ValueError(f"max must be >= min (min {self.min}, max {self.max})")
        return self


class ExponentialTime(_Strict):
    """Memoryless think times (a person reading, then typing) with the given mean."""

    dist: Literal["exponential"]
    mean: Secs
    max: Secs | None = None


class LogNormalTime(_Strict):
    dist: Literal["lognormal"]
    mean: Annotated[float, Field(gt=0, le=86400)]
    sigma: Annotated[float, Field(ge=0, le=5)] = 0.5
    max: Secs | None = None


ThinkDist = Annotated[FixedTime | UniformTime | ExponentialTime | LogNormalTime, Field(discriminator="dist")]


def _time_shorthand(value: Any) -> Any:
    """`think_time_s: 2` means a fixed think time (ints and floats both read as seconds)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"dist": "fixed", "value": float(value)}
    if isinstance(value, dict) and "dist" not in value and "value" in value:
        value = {"dist": "fixed", **value}
    if isinstance(value, dict):  # YAML `min: 1` is an int: seconds are floats here
        return {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in value.items()}
    return value


class FanOut(_Strict):
    """A tool call that delegates to N sub-agents: each starts from the parent's whole history plus
    a task of its own, makes its own calls (tool calls between them), and returns its last reply;
    the parent continues once every sub-agent has returned (joined)."""

    probability: Annotated[float, Field(ge=0, le=1)] = Field(
        default=0.25, description="chance that a tool call is a fan-out instead of a plain tool"
    )
    agents: LengthDist = Field(default_factory=lambda: Fixed(value=3), description="sub-agents per fan-out")
    steps: LengthDist = Field(default_factory=lambda: Fixed(value=2), description="LLM calls each sub-agent makes")
    task_tokens: LengthDist = Field(
        default_factory=lambda: Fixed(value=64), description="each sub-agent's task message"
    )
    result_tokens: LengthDist = Field(
        default_factory=lambda: Fixed(value=96),
        description="max_tokens of a sub-agent's last call (what returns to the parent)",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {
                k: length_shorthand(v) if k in ("agents", "steps", "task_tokens", "result_tokens") else v
                for k, v in data.items()
            }
        return data


class AgentSpec(_Strict):
    """Agentic turns: after a user message the assistant calls tools (each call a short reply, then
    the tool's result after its latency, then the next request with the whole history) before its
    final answer; some calls fan out to sub-agents (`fan_out`)."""

    tool_calls: LengthDist = Field(description="tool calls per user turn (each one more request)")
    call_tokens: LengthDist = Field(
        default_factory=lambda: Fixed(value=32), description="max_tokens of a request whose reply is a tool call"
    )
    tool_result_tokens: LengthDist = Field(description="length of a tool's result, sent back in the next request")
    tool_latency_s: ThinkDist = Field(
        default_factory=lambda: FixedTime(value=0.0), description="how long a tool takes before its result is sent back"
    )
    fan_out: FanOut | None = None
    tool_format: Literal["openai", "text"] = Field(
        default="openai",
        description="openai: assistant tool_calls + role 'tool' messages (what agents send); text: "
        "the call as assistant text and the result as a user message (any chat template)",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in ("tool_calls", "call_tokens", "tool_result_tokens"):
                if key in data:
                    data[key] = length_shorthand(data[key])
            if "tool_latency_s" in data:
                data["tool_latency_s"] = _time_shorthand(data["tool_latency_s"])
        return data


class SessionSpec(_Strict):
    turns: LengthDist | None = Field(
        default=None,
        description="user turns per session (a length distribution); "
        "with a dataset: at most this many of each recorded conversation's turns",
    )
    think_time_s: ThinkDist = Field(
        default_factory=lambda: FixedTime(value=0.0), description="pause between a reply's end and the next user turn"
    )
    user_tokens: LengthDist | None = Field(default=None, description="length of each new user message")
    output_tokens: LengthDist | None = Field(default=None, description="max_tokens of each reply")
    system_prompt: SharedPrefix | None = Field(
        default=None,
        description="a system prompt sessions share: tokens, "
        "count (distinct prompts), fraction (of sessions that have one)",
    )
    dataset: Dataset | None = Field(
        default=None,
        description="recorded conversations (ShareGPT conversations or "
        "chat messages): the user turns in order, the replies from the server",
    )
    agent: AgentSpec | None = Field(
        default=None,
        description="agentic turns: tool calls and sub-agent fan-out "
        "between a user message and the final answer (harness.workload.agent)",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in ("turns", "user_tokens", "output_tokens"):
                if key in data:
                    data[key] = length_shorthand(data[key])
            if "think_time_s" in data:
                data["think_time_s"] = _time_shorthand(data["think_time_s"])
        return data

    @model_validator(mode="after")
    def _complete(self) -> SessionSpec:
        if self.dataset is None:
            missing = [k for k in ("turns", "user_tokens", "output_tokens") if getattr(self, k) is None]
            if missing:
                raise ValueError(
                    f"{' and '.join(missing)} required (a length or a distribution), or a dataset of "
                    "recorded conversations"
                )
        elif self.user_tokens is not None:
            raise ValueError("user_tokens: a dataset's user turns have their own lengths; remove user_tokens")
        if self.agent is not None and self.dataset is not None:
            raise ValueError(
                "agent: agentic sessions are generated (turns, user_tokens, output_tokens); remove dataset"
            )
        return self
