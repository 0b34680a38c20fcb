"""OpenAI request parsing and validation, with vLLM's error messages.

Prompt tokens are words (`harness.workload.builtin_tokenizer`): a completion's prompt is its
words; a chat's prompt is the words of every message's content in order, with no template tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.workload.builtin_tokenizer import VOCAB


class ApiError(Exception):
    """An OpenAI-style error response: `{"error": {message, type, param, code}}`."""

    TYPES: ClassVar[dict[int, str]] = {
        400: "BadRequestError",
        404: "NotFoundError",
        429: "RateLimitError",
        500: "InternalServerError",
        503: "ServiceUnavailableError",
    }

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.TYPES.get(self.status, "APIError"),
                "param": self.param,
                "code": self.status,
            }
        }


@dataclass
class GenParams:
    prompt_words: list[str]
    max_tokens: int
    min_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool
    continuous_usage: bool
    model: str | None = None  # the name asked for (a LoRA adapter's name selects the adapter)
    greedy: bool = False  # temperature 0 (or top_k 1): deterministic text (harness/sim/greedy.py)
    logprobs: int | None = None  # None: none asked; n: the chosen token's log-prob plus n alternatives


def _content_words(content: Any) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return content.split()
    if isinstance(content, list):  # content parts
        words: list[str] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                words.extend(part["text"].split())
            elif isinstance(part, str):
                words.extend(part.split())
        return words
    raise ApiError(400, "message content must be a string or a list of content parts", "messages")


def prompt_words(body: dict, chat: bool) -> list[str]:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty list", "messages")
        words: list[str] = []
        for m in messages:
            if not isinstance(m, dict):
                raise ApiError(400, "each message must be an object", "messages")
            words.extend(_content_words(m.get("content")))
            for call in m.get("tool_calls") or ():  # an assistant's tool call: the template renders name and arguments
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict):
                    words.extend(str(fn.get("name") or "").split())
                    words.extend(str(fn.get("arguments") or "").split())
        return words
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt.split()
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):  # token ids
        return [VOCAB[t % len(VOCAB)] for t in prompt]
    if isinstance(prompt, list):
        raise ApiError(400, "batched prompts are not supported by the simulator; send one prompt per request", "prompt")
    raise ApiError(400, "'prompt' must be a string or a list of token ids", "prompt")


def _int_field(body: dict, name: str) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ApiError(400, f"'{name}' must be an integer", name)
    return v


def _logprobs(body: dict, chat: bool) -> int | None:
    """chat: `logprobs: true` with `top_logprobs: n`; completions: `logprobs: n` (vLLM allows up to 20)."""
    n: int | None
    if chat:
        if not body.get("logprobs"):
            return None
        n = _int_field(body, "top_logprobs") or 0
        name = "top_logprobs"
    else:
        n = _int_field(body, "logprobs")
        if n is None:
            return None
        name = "logprobs"
    if not 0 <= n <= 20:
        raise ApiError(400, f"{name} must be in [0, 20], got {n}.", name)
    return n


def parse_generate(body: Any, *, chat: bool, served: list[str], max_model_len: int, force_usage: bool) -> GenParams:
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    model = body.get("model")
    if model is not None and model not in served:
        raise ApiError(404, f"The model `{model}` does not exist.", "model")
    n = body.get("n", 1)
    if n not in (1, None):
        raise ApiError(400, "n > 1 is not supported by the simulator", "n")
    words = prompt_words(body, chat)
    num_prompt = len(words)
    max_tokens = _int_field(body, "max_completion_tokens") if chat else None
    if max_tokens is None:
        max_tokens = _int_field(body, "max_tokens")
    if num_prompt >= max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, your request "
            f"has {num_prompt} input tokens. Please reduce the length of the input messages.",
        )
    if max_tokens is None:
        max_tokens = (max_model_len - num_prompt) if chat else 16
    if max_tokens < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens")
    if num_prompt + max_tokens > max_model_len:
        raise ApiError(
            400,
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
            f"context length is {max_model_len} tokens and your request has {num_prompt} input tokens "
            f"({max_tokens} > {max_model_len} - {num_prompt}).",
            "max_tokens",
        )
    min_tokens = _int_field(body, "min_tokens") or 0
    if min_tokens < 0 or min_tokens > max_tokens:
        raise ApiError(400, f"min_tokens must be in [0, max_tokens={max_tokens}], got {min_tokens}.", "min_tokens")
    stream = bool(body.get("stream", False))
    opts = body.get("stream_options")
    if opts is not None and not stream:
        raise ApiError(400, "Stream options can only be defined when `stream=True`.", "stream_options")
    opts = opts if isinstance(opts, dict) else {}
    include_usage = bool(opts.get("include_usage", False)) or force_usage
    continuous = include_usage and (bool(opts.get("continuous_usage_stats", False)) or force_usage)
    temperature = body.get("temperature", 1.0)
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0
    ):
        raise ApiError(400, "temperature must be a non-negative number", "temperature")
    greedy = temperature == 0 or body.get("top_k") == 1
    return GenParams(
        prompt_words=words,
        model=model if isinstance(model, str) else None,
        greedy=greedy,
        logprobs=_logprobs(body, chat),
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous,
    )
