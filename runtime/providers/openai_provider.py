"""OpenAI Chat Completions with tools, for OpenAI or any compatible server."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, cast

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from pydantic import ValidationError

from runtime.metrics import LLM_TOKENS
from runtime.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from runtime.providers.base import ProviderError
from runtime.tracing import hooks as tracing

log = logging.getLogger(__name__)


def to_openai_message(message: Message) -> ChatCompletionMessageParam:
    if isinstance(message, SystemMessage | UserMessage):
        return cast(ChatCompletionMessageParam, {"role": message.role, "content": message.content})
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    return cast(ChatCompletionMessageParam, out)


def to_openai_tool(spec: ToolSpec) -> ChatCompletionToolParam:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def _describe(exc: openai.OpenAIError, base_url: str) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "the model server did not answer in time"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot reach the model server at {base_url}"
    if isinstance(exc, openai.AuthenticationError):
        return "the model server refused the API key (HTTP 401); check OPENAI_API_KEY"
    if isinstance(exc, openai.RateLimitError):
        return "the model server is rate limiting us (HTTP 429); try again shortly"
    if isinstance(exc, openai.APIStatusError):
        return f"the model server answered HTTP {exc.status_code}"
    return f"the model request failed ({type(exc).__name__})"


class OpenAIProvider:
    offline_demo = False

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self.name = f"openai:{model}"
        self.model = model
        # Local OpenAI-compatible servers often need no key, but the client insists on one.
        self.client = AsyncOpenAI(
            api_key=api_key or "unused", base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        try:
            if tools:
                response = await self.client.chat.completions.create(
                    model=self.model,
                    messages=[to_openai_message(m) for m in messages],
                    tools=[to_openai_tool(t) for t in tools],
                )
            else:
                response = await self.client.chat.completions.create(
                    model=self.model, messages=[to_openai_message(m) for m in messages]
                )
        except openai.OpenAIError as exc:
            log.warning("model request failed: %s", type(exc).__name__)
            raise ProviderError(_describe(exc, str(self.client.base_url))) from exc
        usage = response.usage
        if usage is not None:
            LLM_TOKENS.labels(self.name, "prompt").inc(usage.prompt_tokens or 0)
            LLM_TOKENS.labels(self.name, "completion").inc(usage.completion_tokens or 0)
            tracing.annotate(
                prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens
            )
        if not response.choices:
            raise ProviderError("the model server returned no choices")
        message = response.choices[0].message
        try:
            calls = [
                ToolCall(id=c.id, name=c.function.name, arguments=_arguments(c.function.arguments))
                for c in message.tool_calls or []
                if c.type == "function"
            ]
            return AssistantMessage(content=message.content, tool_calls=calls)
        except ValidationError as exc:
            log.warning("malformed model answer: %d problems", exc.error_count())
            raise ProviderError("the model server returned a malformed answer") from None


def _arguments(raw: object) -> str:
    """A tool call's arguments as JSON text: some compatible servers send an object."""
    if raw is None or raw == "":
        return "{}"
    if isinstance(raw, str):
        return raw
    try:
        return json.dumps(raw, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(raw)
