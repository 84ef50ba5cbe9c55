"""OpenAI Chat Completions with tools, for OpenAI or any compatible server."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import mimetypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import (
    ChatCompletionChunk,
    ChatCompletionMessageParam,
    ChatCompletionStreamOptionsParam,
    ChatCompletionToolParam,
)
from openai.types.completion_usage import CompletionUsage
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
from runtime.providers.base import OnText, ProviderError
from runtime.providers.names import name_map, wire_name
from runtime.tracing import hooks as tracing

log = logging.getLogger(__name__)
# Seconds before a broken stream is asked again, doubled each time (as the client's retries).
STREAM_RETRY_DELAY = 0.5


def to_openai_message(message: Message, images: Path | None = None) -> ChatCompletionMessageParam:
    """`images`: the work dir, when the model takes images: a user message's attached images
    go with it as image parts (read now; one that is gone is left out, its name stays in the
    text)."""
    if isinstance(message, UserMessage) and message.images and images is not None:
        parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
        for path in message.images:
            url = image_url(images, path)
            if url is not None:
                parts.append({"type": "image_url", "image_url": {"url": url}})
        return cast(ChatCompletionMessageParam, {"role": "user", "content": parts})
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
                "function": {"name": wire_name(call.name), "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    return cast(ChatCompletionMessageParam, out)


def image_url(workdir: Path, path: str) -> str | None:
    """An attached image as a data URL, or None when it is no longer a file in the work dir."""
    place = (workdir / path).resolve()
    root = workdir.resolve()
    if not place.is_relative_to(root) or not place.is_file():
        return None
    kind = mimetypes.guess_type(place.name)[0] or "image/png"
    return f"data:{kind};base64,{base64.b64encode(place.read_bytes()).decode('ascii')}"


def to_openai_tool(spec: ToolSpec) -> ChatCompletionToolParam:
    return {
        "type": "function",
        "function": {
            "name": wire_name(spec.name),
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


class BrokenStream(Exception):
    """A streamed answer that broke off before its end: asked again, like a failed request."""


@dataclass
class _Call:
    id: str | None = None
    type: str | None = None
    name: str = ""
    arguments: str = ""


@dataclass
class StreamedAnswer:
    """A streamed answer put together from its chunks: the text in order, each tool call's
    pieces by their index (a call's id and name come once, its arguments in pieces)."""

    text: str = ""
    calls: dict[int, _Call] = field(default_factory=dict)
    finished: bool = False  # a finish_reason arrived: the answer is whole
    usage: CompletionUsage | None = None

    def add(self, chunk: ChatCompletionChunk) -> bool:
        """Take one chunk in; True when the text grew."""
        if chunk.usage is not None:
            self.usage = chunk.usage
        grew = False
        # Compatible servers leave parts out (no choices, no delta): they count as empty.
        for choice in chunk.choices or []:
            if (choice.index or 0) != 0:
                continue
            if choice.finish_reason is not None:
                self.finished = True
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                self.text += delta.content
                grew = True
            for piece in delta.tool_calls or []:
                call = self.calls.setdefault(piece.index, _Call())
                call.id = call.id or piece.id
                call.type = call.type or piece.type
                function = piece.function
                if function is not None:
                    # Some servers repeat the whole name in every piece: take it once.
                    if function.name and function.name != call.name:
                        call.name += function.name
                    if function.arguments:
                        call.arguments += _arguments(function.arguments)
        return grew

    def message(self, names: Mapping[str, str] | None = None) -> AssistantMessage:
        """`names`: wire name -> tool name, for the tools offered (runtime.providers.names)."""
        calls = [
            ToolCall(
                id=cast(str, c.id),
                name=(names or {}).get(c.name, c.name),
                arguments=_arguments(c.arguments),
            )
            for _, c in sorted(self.calls.items())
            if c.type in (None, "function")
        ]
        return AssistantMessage(content=self.text or None, tool_calls=calls)


class OpenAIProvider:
    offline_demo = False

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        stream: bool = False,
        images: Path | None = None,
    ) -> None:
        """`images`: the work dir, for a model that takes images (attached ones are sent)."""
        self.name = f"openai:{model}"
        self.images = images
        self.model = model
        self.stream = stream  # ask for the answer as server-sent events
        self.max_retries = max_retries
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
                    messages=[to_openai_message(m, self.images) for m in messages],
                    tools=[to_openai_tool(t) for t in tools],
                )
            else:
                response = await self.client.chat.completions.create(
                    model=self.model, messages=[to_openai_message(m, self.images) for m in messages]
                )
        except openai.OpenAIError as exc:
            raise self._failed(exc) from exc
        self._count(response.usage)
        if not response.choices:
            raise ProviderError("the model server returned no choices")
        message = response.choices[0].message
        try:
            names = name_map(t.name for t in tools)
            calls = [
                ToolCall(
                    id=c.id,
                    name=names.get(c.function.name, c.function.name),
                    arguments=_arguments(c.function.arguments),
                )
                for c in message.tool_calls or []
                if c.type == "function"
            ]
            return AssistantMessage(content=message.content, tool_calls=calls)
        except ValidationError as exc:
            raise _malformed(exc) from None

    async def complete_streaming(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], on_text: OnText
    ) -> AssistantMessage:
        """`complete`, with the answer streamed when streaming is on. A request that fails is
        retried by the client as always; a stream that breaks off after it began is asked
        again as many times, then fails the same way."""
        if not self.stream:
            return await self.complete(messages, tools)
        for attempt in range(self.max_retries + 1):
            try:
                answer = await self._stream_once(messages, tools, on_text)
            except BrokenStream as exc:
                log.warning("model stream %s, attempt %d", exc, attempt + 1)
                if attempt < self.max_retries:
                    await asyncio.sleep(min(STREAM_RETRY_DELAY * 2**attempt, 8.0))
                    continue
                if isinstance(exc.__cause__, openai.APITimeoutError):
                    raise self._failed(exc.__cause__) from exc
                raise ProviderError("the model server's answer broke off mid-way") from exc
            self._count(answer.usage)
            try:
                return answer.message(name_map(t.name for t in tools))
            except ValidationError as exc:
                raise _malformed(exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _stream_once(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], on_text: OnText
    ) -> StreamedAnswer:
        try:
            stream = await self._open_stream(messages, tools)
        except openai.OpenAIError as exc:  # the client retried already
            raise self._failed(exc) from exc
        answer = StreamedAnswer()
        async with stream:
            chunks = stream.__aiter__()
            while True:
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except openai.APIError as exc:
                    # Cut off (APIConnectionError), timed out, or an error event in the stream.
                    raise BrokenStream(f"broke off ({type(exc).__name__})") from exc
                except ValueError:  # a chunk that is not JSON
                    log.warning("malformed model answer: a chunk that is not JSON")
                    raise ProviderError("the model server returned a malformed answer") from None
                if answer.add(chunk):
                    await on_text(answer.text)
        if not answer.finished:
            raise BrokenStream("ended before it was finished")
        return answer

    async def _open_stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncStream[ChatCompletionChunk]:
        sent = [to_openai_message(m, self.images) for m in messages]
        options: ChatCompletionStreamOptionsParam = {"include_usage": True}
        if tools:
            return await self.client.chat.completions.create(
                model=self.model,
                messages=sent,
                tools=[to_openai_tool(t) for t in tools],
                stream=True,
                stream_options=options,
            )
        return await self.client.chat.completions.create(
            model=self.model, messages=sent, stream=True, stream_options=options
        )

    def _failed(self, exc: openai.OpenAIError) -> ProviderError:
        log.warning("model request failed: %s", type(exc).__name__)
        return ProviderError(_describe(exc, str(self.client.base_url)))

    def _count(self, usage: CompletionUsage | None) -> None:
        if usage is not None:
            LLM_TOKENS.labels(self.name, "prompt").inc(usage.prompt_tokens or 0)
            LLM_TOKENS.labels(self.name, "completion").inc(usage.completion_tokens or 0)
            tracing.annotate(
                prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens
            )


def _malformed(exc: ValidationError) -> ProviderError:
    log.warning("malformed model answer: %d problems", exc.error_count())
    return ProviderError("the model server returned a malformed answer")


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
