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

    def build_body(self, prompt: Prompt, model: str, sampling: dict[str, Any], stream_options: dict[str, Any]) -> dict[str, Any]:
        """The JSON body of a streaming request."""
        ...

    def content(self, event: dict[str, Any]) -> str | None:
        """Text (content or reasoning) the event's first choice carries; None if it has no choice."""
        ...

    def finish_reason(self, event: dict[str, Any]) -> str | None: ...


ADAPTERS: Registry[ApiAdapter] = Registry("api")


def get_adapter(name: str) -> ApiAdapter:
    # import the built-in adapters so they register themselves
    from harness.client.adapters import openai_chat, openai_completions  # noqa: F401

    return ADAPTERS.get(name)
