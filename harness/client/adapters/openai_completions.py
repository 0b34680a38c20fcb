"""OpenAI `/v1/completions`: the prompt is prefix + text."""

from __future__ import annotations

from typing import Any

from harness.client.adapters.base import ADAPTERS, Prompt


class OpenAICompletions:
    name = "openai-completions"
    path = "/v1/completions"

    def build_body(self, prompt: Prompt, model: str, sampling: dict[str, Any], stream_options: dict[str, Any]) -> dict[str, Any]:
        text = f"{prompt.prefix} {prompt.text}" if prompt.prefix else prompt.text
        return {
            "model": model,
            "prompt": text,
            "max_tokens": prompt.max_tokens,
            "stream": True,
            "stream_options": stream_options,
            **sampling,
        }

    def content(self, event: dict[str, Any]) -> str | None:
        choices = event.get("choices")
        if not choices:
            return None
        return choices[0].get("text") or ""

    def finish_reason(self, event: dict[str, Any]) -> str | None:
        choices = event.get("choices")
        return choices[0].get("finish_reason") if choices else None


ADAPTERS.add(OpenAICompletions.name, OpenAICompletions())
