"""A local OpenAI-compatible server that answers /v1/chat/completions from a script.

Each scripted step is either an assistant reply (text and/or tool calls) or an HTTP error.
Every request body is recorded so tests can check what the real `openai` client sent.

A request with `"stream": true` gets the same reply as server-sent events, the way OpenAI
sends them: `data: {chat.completion.chunk}` lines, then `data: [DONE]`. The text comes in
`chunks` pieces, each tool call as a first piece (id, type, name) then its arguments in
`chunks` pieces, `chunk_delay` seconds apart; a `finish_reason` chunk, and a usage chunk when
`stream_options.include_usage` asked for it. `cut_after` breaks the stream off after that
many chunks (the connection dropped; or with `cut_clean`, the body ended properly but early).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Step:
    content: str | None = None
    tool_calls: list[tuple[str, str, dict[str, Any] | str]] = field(default_factory=list)
    status: int = 200
    error: dict[str, Any] | None = None  # a failure's `error` object (message, type, code)
    refusal: str | None = None  # the model refused: its words, in place of content
    finish: str | None = None  # the finish_reason, when not what the answer implies
    delay: float = 0.0  # seconds before answering (a slow model)
    # Streamed answers only:
    chunks: int = 3  # pieces of the text, and of each call's arguments
    chunk_delay: float = 0.0  # seconds between two pieces
    interleave: bool = False  # the pieces of several tool calls mixed (by their index)
    cut_after: int | None = None  # chunks sent before the stream breaks off
    cut_clean: bool = False  # break off by ending the body (else: drop the connection)


def reply(content: str) -> Step:
    return Step(content=content)


def calls(*items: tuple[str, str, dict[str, Any] | str], content: str | None = None) -> Step:
    """Tool calls as (id, name, arguments); arguments may be raw text to test bad JSON."""
    return Step(content=content, tool_calls=list(items))


def error(status: int, message: str = "scripted failure", code: str | None = None) -> Step:
    """An HTTP failure whose body is OpenAI's error object."""
    return Step(status=status, error={"message": message, "type": "server_error", "code": code})


def streamed(content: str, chunks: int = 8, delay: float = 0.4) -> Step:
    """A text answer that arrives (when streamed) in `chunks` pieces `delay` seconds apart."""
    return Step(content=content, chunks=chunks, chunk_delay=delay)


def _finish(step: Step) -> str:
    return "tool_calls" if step.tool_calls else "stop"


def pieces(text: str, count: int) -> list[str]:
    """`text` cut into at most `count` pieces of about the same length."""
    size = max(1, math.ceil(len(text) / max(count, 1)))
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: list[Step] = []
        # Answers each request from its body instead of the script (requests that arrive
        # at once from many conversations).
        self.respond: Callable[[dict[str, Any]], Step] | None = None
        self.requests: list[dict[str, Any]] = []
        self.models = ["fake-model", "gpt-4o-mini"]  # what GET /v1/models lists
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def settings(self, **more: str) -> dict[str, Any]:
        """The settings that make this fake the model (OPENAI_BASE_URL, OPENAI_API_KEY), plus
        `more`: for `serving(...)` or a process's environment. All strings; typed `Any` so
        that `**` of them may go to a `serving(..., start_worker=…, **overrides)`."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "k", **more}

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _models(self, request: web.Request) -> web.Response:
        if not request.headers.get("Authorization", "").startswith("Bearer "):
            return web.json_response({"error": {"message": "no API key"}}, status=401)
        listed = [{"id": name, "object": "model", "owned_by": "fake"} for name in self.models]
        return web.json_response({"object": "list", "data": listed})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        if self.respond is None and not self.script:
            return web.json_response({"error": {"message": "script exhausted"}}, status=500)
        step = self.script.pop(0) if self.respond is None else self.respond(body)
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.status != 200:
            failure = step.error or {"message": "scripted failure", "type": "server_error"}
            return web.json_response({"error": failure}, status=step.status)
        if body.get("stream"):
            return await self._stream(request, body, step)
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if step.refusal is not None:
            message["refusal"] = step.refusal
        if step.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for call_id, name, args in step.tool_calls
            ]
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": step.finish or _finish(step),
                    }
                ],
                # Deterministic counts: 10 a message sent, 5 an answer.
                "usage": {
                    "prompt_tokens": 10 * len(body.get("messages", [])),
                    "completion_tokens": 5,
                    "total_tokens": 10 * len(body.get("messages", [])) + 5,
                },
            }
        )

    async def _stream(
        self, request: web.Request, body: dict[str, Any], step: Step
    ) -> web.StreamResponse:
        name = f"chatcmpl-{len(self.requests)}"

        def chunk(delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
            choices = (
                [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            )
            return {
                "id": name,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": choices,
            }

        # (chunk, whether a delay comes before it)
        sent: list[tuple[dict[str, Any], bool]] = [
            (chunk({"role": "assistant", "content": ""}), False)
        ]
        sent += [
            (chunk({"content": piece}), True) for piece in pieces(step.content or "", step.chunks)
        ]
        per_call: list[list[dict[str, Any]]] = []
        for index, (call_id, tool, args) in enumerate(step.tool_calls):
            text = args if isinstance(args, str) else json.dumps(args)
            head = {"index": index, "id": call_id, "type": "function"}
            head["function"] = {"name": tool, "arguments": ""}
            rest = [
                {"index": index, "function": {"arguments": p}} for p in pieces(text, step.chunks)
            ]
            per_call.append([head, *rest])
        if step.interleave:
            mixed = itertools.chain.from_iterable(itertools.zip_longest(*per_call))
            deltas = [d for d in mixed if d is not None]
        else:
            deltas = [d for call in per_call for d in call]
        sent += [(chunk({"tool_calls": [d]}), True) for d in deltas]
        sent += [(chunk({"refusal": p}), True) for p in pieces(step.refusal or "", step.chunks)]
        sent.append((chunk({}, step.finish or _finish(step)), False))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = chunk(None)
            usage["usage"] = {
                "prompt_tokens": 10 * len(body.get("messages", [])),
                "completion_tokens": 5,
                "total_tokens": 10 * len(body.get("messages", [])) + 5,
            }
            sent.append((usage, False))

        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        first = True
        for i, (data, delayed) in enumerate(sent):
            if step.cut_after is not None and i >= step.cut_after:
                if step.cut_clean:
                    await response.write_eof()
                elif request.transport is not None:
                    request.transport.abort()  # mid-body: the client sees a broken stream
                return response
            if delayed and not first and step.chunk_delay:
                await asyncio.sleep(step.chunk_delay)
            first = first and not delayed
            await response.write(f"data: {json.dumps(data)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
