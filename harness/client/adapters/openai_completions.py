"""OpenAI `/v1/completions`: the prompt is prefix + text."""

from __future__ import annotations

from typing import Any

from harness.client.adapters.base import (
    ADAPTERS,
    Prompt,
    choice_finish_reason,
    first_choice,
    streaming_body,
    text_field,
)


class OpenAICompletions:
    name = "openai-completions"
    path = "/v1/completions"

    def build_body(
        self, prompt: Prompt, model: str, sampling: dict[str, Any], stream_options: dict[str, Any]
    ) -> dict[str, Any]:
        text = f"{prompt.prefix} {prompt.text}" if prompt.prefix else prompt.text
        return streaming_body(model, "prompt", text, prompt, sampling, stream_options)

    def content(self, event: dict[str, Any]) -> str | None:
        choice = first_choice(event)
        if choice is None:
            return None
        return text_field(choice, "text")

    def finish_reason(self, event: dict[str, Any]) -> str | None:
        return choice_finish_reason(event)


ADAPTERS.add(OpenAICompletions.name, OpenAICompletions())
