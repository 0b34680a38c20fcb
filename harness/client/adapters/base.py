"""The API adapter seam: build a request body, and say what one decoded SSE event carries.

One module per API registered by name in `ADAPTERS`. Adapters never touch sockets or clocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from harness.registry import Registry


@dataclass(frozen=True, slots=True)
class Prompt:
    prefix: str  # shared prefix text ("" when the request uses none)
    text: str  # the request's own text (after the prefix)
    max_tokens: int
    messages: tuple[dict[str, str], ...] | None = None  # chat messages replayed from a dataset (chat API)


class ApiAdapter(Protocol):
    name: str
    path: str

    def build_body(
        self, prompt: Prompt, model: str, sampling: dict[str, Any], stream_options: dict[str, Any]
    ) -> dict[str, Any]:
        """The JSON body of a streaming request."""
        ...

    def content(self, event: dict[str, Any]) -> str | None:
        """Text (content or reasoning) the event's first choice carries; None if it has no choice."""
        ...

    def finish_reason(self, event: dict[str, Any]) -> str | None: ...


ADAPTERS: Registry[ApiAdapter] = Registry("api")


def first_choice(event: dict[str, Any]) -> dict[str, Any] | None:
    """The event's first choice, None when it has none; ValueError when the shape is wrong
    (a server's junk must become a counted malformed event, not a crash)."""
    choices = event.get("choices")
    if not choices:
        return None
    if not isinstance(choices, list):
        raise ValueError("choices is not a list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise ValueError("choices[0] is not an object")
    return choice


def text_field(obj: dict[str, Any], name: str) -> str:
    """A text field of a choice or delta: "" when absent or null; ValueError when not a string."""
    value = obj.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{name} is not a string ({type(value).__name__})")
    return value


def streaming_body(
    model: str,
    input_key: str,
    input_value: Any,
    prompt: Prompt,
    sampling: dict[str, Any],
    stream_options: dict[str, Any],
) -> dict[str, Any]:
    """The body OpenAI-style streaming APIs share; the API's input field (`messages`, `prompt`)
    comes second, as the adapters always sent it."""
    return {
        "model": model,
        input_key: input_value,
        "max_tokens": prompt.max_tokens,
        "stream": True,
        "stream_options": stream_options,
        **sampling,
    }


def choice_finish_reason(event: dict[str, Any]) -> str | None:
    """The first choice's finish_reason (None without a choice): the same in both OpenAI APIs."""
    choice = first_choice(event)
    return choice.get("finish_reason") if choice is not None else None


def register_all() -> None:
    """Import every adapter module of this folder, so each registers itself (a new API is one
    file: its module name with `-` for `_` is its name, which the scenario's `target.api` choices
    read from the folder, harness.scenario.choices)."""
    import importlib
    import pkgutil

    from harness.client import adapters

    for module in pkgutil.iter_modules(adapters.__path__):
        if module.name != "base" and not module.name.startswith("_"):
            importlib.import_module(f"{adapters.__name__}.{module.name}")


def get_adapter(name: str) -> ApiAdapter:
    register_all()
    return ADAPTERS.get(name)
