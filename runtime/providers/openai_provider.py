"""OpenAI Chat Completions with tools, for OpenAI or any compatible server."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import mimetypes
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx2
import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessageParam,
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
from runtime.providers.aiohttp_transport import http_client
from runtime.providers.base import OnText, ProviderError
from runtime.providers.names import name_map, wire_name
from runtime.providers.sent import SentMessages
from runtime.redact import one_line, redact_text
from runtime.tracing import hooks as tracing

log = logging.getLogger(__name__)
# Seconds before a broken stream is asked again, doubled each time (as the client's retries).
STREAM_RETRY_DELAY = 0.5
COMPLETIONS = "/chat/completions"
REASON_CHARS = 200  # of a model server's error message, in the chat
# Why an answer ended short (its `finish_reason`), in the note shown after it.
_CUT_BY = {
    "length": "by the model's output token limit",
    "content_filter": "by the model server's content filter",
}


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


def _describe(exc: openai.OpenAIError, base_url: str, model: str) -> tuple[str, str]:
    """What to tell the chat, in one line with what to do, and the failure's code
    (runtime/error_codes.py)."""
    if isinstance(exc, openai.APITimeoutError):
        return "the model server did not answer in time", "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot reach the model server at {base_url}", "unreachable"
    if not isinstance(exc, openai.APIStatusError):
        return f"the model request failed ({type(exc).__name__})", "provider_error"
    status, why = exc.status_code, _reason(exc)
    said = f"HTTP {status}{': ' + why if why else ''}"
    if status == 400 and _too_long(exc.code, why):
        text = (
            f"the conversation is longer than the model's context window ({said}); start a "
            "new thread, or lower CLAWGATE_CONTEXT_BUDGET"
        )
    elif status == 400:
        text = f"the model server refused the request ({said})"
    elif status == 401:
        text = f"the model server refused the API key ({said}); check OPENAI_API_KEY"
    elif status == 403:
        text = f"the model server denied access ({said}); check what the API key may use"
    elif status == 404:
        text = (
            f"the model server does not serve the model {model} ({said}); check CLAWGATE_MODEL "
            "and OPENAI_BASE_URL (`clawgate doctor` lists the models it serves)"
        )
    elif status == 429 and exc.code == "insufficient_quota":
        text = f"the model account is out of quota ({said}); check its plan and billing"
    elif status == 429:
        return f"the model server is rate limiting us ({said}); try again shortly", "rate_limited"
    elif status >= 500:
        text = f"the model server failed ({said}); try again shortly"
    else:
        text = f"the model server answered {said}"
    return text, f"provider_error:{status}"


def _reason(exc: openai.APIStatusError) -> str:
    """The server's own words on why (its error's message): one line, redacted, cut."""
    body = exc.body
    said = body.get("message") if isinstance(body, Mapping) else body
    if not isinstance(said, str):
        return ""
    return one_line(redact_text(said), REASON_CHARS)


def _too_long(code: str | None, reason: str) -> bool:
    """A 400 for a request over the model's context window, as OpenAI and the usual
    compatible servers (vLLM, llama.cpp, Ollama) word it."""
    lowered = reason.lower()
    return code == "context_length_exceeded" or any(
        words in lowered for words in ("context length", "context window", "maximum context")
    )


def _finished(
    content: str | None, refusal: str | None, finish: str | None, calls: list[ToolCall]
) -> AssistantMessage:
    """The answer as it ended: a refusal in its own words; one cut off by the output token
    limit or a content filter says so. Its tool calls, maybe cut off too, are not run."""
    text = content or refusal or None
    cut = _CUT_BY.get(finish or "")
    if cut is None:
        return AssistantMessage(content=text, tool_calls=calls)
    if calls:
        raise ProviderError(
            f"the model's answer was stopped {cut} before its tool calls were complete; "
            "none of them was run",
            "answer_cut_off",
        )
    note = f"[The answer was stopped here {cut}.]"
    return AssistantMessage(content=f"{text}\n\n{note}" if text else note)


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
    refusal: str = ""
    calls: dict[int, _Call] = field(default_factory=dict)
    finished: bool = False  # a finish_reason arrived: the answer is whole
    finish_reason: str | None = None
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
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            if delta.refusal:
                self.refusal += delta.refusal
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
        return _finished(self.text or None, self.refusal or None, self.finish_reason, calls)


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

        def encode(messages: Sequence[Message]) -> bytes:
            return _json([to_openai_message(m, images) for m in messages])

        # A model that takes images has them read for every request (runtime.providers.sent).
        self._encode: Callable[[Sequence[Message]], bytes] = (
            encode if images is not None else SentMessages(encode)
        )
        # Local OpenAI-compatible servers often need no key, but the client insists on one.
        self.client = AsyncOpenAI(
            api_key=api_key or "unused",
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client(),
        )

    async def aclose(self) -> None:
        await self.client.close()

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        try:
            raw = await self.client.post(
                COMPLETIONS, content=self._request(messages, tools), cast_to=httpx2.Response
            )
        except openai.OpenAIError as exc:
            raise self._failed(exc) from exc
        response = _completion(raw.content)
        self._count(response.usage)
        if not response.choices:
            raise ProviderError("the model server returned no choices", "malformed_answer")
        choice = response.choices[0]
        message = choice.message
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
            return _finished(message.content, message.refusal, choice.finish_reason, calls)
        except ValidationError as exc:
            raise _malformed(f"{exc.error_count()} problems") from None

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
                raise ProviderError(
                    "the model server's answer broke off mid-way", "stream_broken"
                ) from exc
            self._count(answer.usage)
            try:
                return answer.message(name_map(t.name for t in tools))
            except ValidationError as exc:
                raise _malformed(f"{exc.error_count()} problems") from None
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
                    raise _malformed("a chunk that is not JSON") from None
                if answer.add(chunk):
                    await on_text(answer.text)
        if not answer.finished:
            raise BrokenStream("ended before it was finished")
        return answer

    async def _open_stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncStream[ChatCompletionChunk]:
        return await self.client.post(
            COMPLETIONS,
            content=self._request(messages, tools, stream=True),
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], stream: bool = False
    ) -> bytes:
        """The request's bytes, built once in the API's JSON shape and posted through the
        client (`client.post`, as the SDK documents for requests it has no method for):
        `chat.completions.create` would walk and transform every parameter again, at about
        0.12 ms a message, and 0.1 ms a call with none. Its client, retries and response
        types are kept. The messages the run's previous step sent are not encoded again."""
        body = b'{"model":' + _json(self.model) + b',"messages":' + self._encode(messages)
        if tools:
            body += b',"tools":' + _json([to_openai_tool(t) for t in tools])
        if stream:
            body += b',"stream":true,"stream_options":{"include_usage":true}'
        return body + b"}"

    def _failed(self, exc: openai.OpenAIError) -> ProviderError:
        log.warning("model request failed: %s", type(exc).__name__)
        return ProviderError(*_describe(exc, str(self.client.base_url), self.model))

    def _count(self, usage: CompletionUsage | None) -> None:
        if usage is not None:
            LLM_TOKENS.labels(self.name, "prompt").inc(usage.prompt_tokens or 0)
            LLM_TOKENS.labels(self.name, "completion").inc(usage.completion_tokens or 0)
            tracing.annotate(
                prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens
            )


def _json(value: object) -> bytes:
    """As the client writes JSON (its `openapi_dumps`, whose extra types a built request
    never holds), with the C encoder."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _completion(raw: bytes) -> ChatCompletion:
    """The answer as the client's response type. Validated from the bytes in one pass (4 µs,
    against 88 for the client's own field-by-field build); an answer that does not fit the schema,
    as compatible servers send (a missing `created`, an unknown `finish_reason`), is built
    leniently, the way the client does."""
    try:
        return ChatCompletion.model_validate_json(raw)
    except ValidationError:
        pass
    try:
        data = json.loads(raw)
    except ValueError:
        raise _malformed("not JSON") from None
    if not isinstance(data, dict):
        raise _malformed("not a JSON object")
    return ChatCompletion.construct(**data)


def _malformed(why: str) -> ProviderError:
    log.warning("malformed model answer: %s", why)
    return ProviderError("the model server returned a malformed answer", "malformed_answer")


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
