"""OpenAI `/v1/chat/completions`: a shared prefix goes in the system message.

Content is `delta.content`; reasoning models stream `delta.reasoning_content` (vLLM, SGLang) or
`delta.reasoning` first, and those count as output for TTFT. The role-only first chunk does not.
"""

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


class OpenAIChat:
    name = "openai-chat"
    path = "/v1/chat/completions"

    def build_body(
        self, prompt: Prompt, model: str, sampling: dict[str, Any], stream_options: dict[str, Any]
    ) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if prompt.messages:  # a dataset's chat, as recorded
            messages = [dict(m) for m in prompt.messages]
        else:
            if prompt.prefix:
                messages.append({"role": "system", "content": prompt.prefix})
            messages.append({"role": "user", "content": prompt.text})
        return streaming_body(model, "messages", messages, prompt, sampling, stream_options)

    def content(self, event: dict[str, Any]) -> str | None:
        choice = first_choice(event)
        if choice is None:
            return None
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise ValueError("choices[0].delta is not an object")
        text = text_field(delta, "content")
        reasoning = text_field(delta, "reasoning_content") or text_field(delta, "reasoning")
        return reasoning + text if reasoning else text

    def finish_reason(self, event: dict[str, Any]) -> str | None:
        return choice_finish_reason(event)


ADAPTERS.add(OpenAIChat.name, OpenAIChat())
