"""OpenAI `/v1/chat/completions`: a shared prefix goes in the system message.

Content is `delta.content`; reasoning models stream `delta.reasoning_content` (vLLM, SGLang) or
`delta.reasoning` first, and those count as output for TTFT. The role-only first chunk does not.
"""

from __future__ import annotations

from typing import Any

from harness.client.adapters.base import ADAPTERS, Prompt


class OpenAIChat:
    name = "openai-chat"
    path = "/v1/chat/completions"

    def build_body(self, prompt: Prompt, model: str, sampling: dict[str, Any], stream_options: dict[str, Any]) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if prompt.messages:  # a dataset's chat, as recorded
            messages = [dict(m) for m in prompt.messages]
        else:
            if prompt.prefix:
                messages.append({"role": "system", "content": prompt.prefix})
            messages.append({"role": "user", "content": prompt.text})
        return {
            "model": model,
            "messages": messages,
            "max_tokens": prompt.max_tokens,
            "stream": True,
            "stream_options": stream_options,
            **sampling,
        }

    def content(self, event: dict[str, Any]) -> str | None:
        choices = event.get("choices")
        if not choices:
            return None
        delta = choices[0].get("delta") or {}
        text = delta.get("content") or ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        return reasoning + text if reasoning else text

    def finish_reason(self, event: dict[str, Any]) -> str | None:
        choices = event.get("choices")
        return choices[0].get("finish_reason") if choices else None


ADAPTERS.add(OpenAIChat.name, OpenAIChat())
