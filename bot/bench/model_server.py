"""A tiny OpenAI-compatible model server for `clawgate bench runtime --model-server`: it lets
the bench run the real `openai` client over real HTTP without a model. Non-streaming
`POST /v1/chat/completions` only: a request whose last message is not a tool result is
answered with a call of the bench's tool (arguments `{}`), one that is with a final
answer, so each turn is message -> tool call -> answer. It counts what it was sent and the CPU
its handler took, for the bench to subtract (it runs in the bench's process).

`clawgate bench ingest --model-server` runs it without a tool in a process of its own
(`model_process`): every request is answered with PLAIN_ANSWER, a plain Slack turn; its counts
are at GET /bench/stats."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from bot.bench.spawned import app_process

PLAIN_ANSWER = "The bench model answers: done."  # how the fake platform knows the answer


@dataclass
class ServerCounts:
    requests: int = 0
    messages: int = 0  # over all requests: what the client sent, history included
    cpu_s: float = 0.0  # process CPU of the handler's parse and answer (not the HTTP reading)


def _answer(body: dict[str, Any], tool: str | None) -> dict[str, Any]:
    """A call of `tool` unless the last message is a tool result; without a tool, PLAIN_ANSWER."""
    messages = body.get("messages") or []
    text = "Done: the tool answered." if tool else PLAIN_ANSWER
    message: dict[str, Any] = {"role": "assistant", "content": text}
    finish = "stop"
    if tool and (not messages or messages[-1].get("role") != "tool"):
        function = {"name": tool, "arguments": "{}"}
        call = {"id": "call_bench", "type": "function", "function": function}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "bench"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _app(tool: str | None, counts: ServerCounts) -> web.Application:
    async def completions(request: web.Request) -> web.Response:
        raw = await request.read()
        # Only the synchronous part is timed: across an await, other tasks' CPU would count.
        started = time.process_time()
        body = json.loads(raw)
        counts.requests += 1
        counts.messages += len(body.get("messages") or [])
        response = web.json_response(_answer(body, tool))
        counts.cpu_s += time.process_time() - started
        return response

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(asdict(counts))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/bench/stats", stats)
    return app


@contextlib.asynccontextmanager
async def model_server(tool: str) -> AsyncIterator[tuple[str, ServerCounts]]:
    """The server on a free port of 127.0.0.1, calling `tool`: its base URL (…/v1) and its
    counts."""
    counts = ServerCounts()
    runner = web.AppRunner(_app(tool, counts), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/v1", counts
    finally:
        await runner.cleanup()


def _plain_app() -> web.Application:
    return _app(None, ServerCounts())


def model_process() -> AbstractAsyncContextManager[tuple[str, int]]:
    """The server answering PLAIN_ANSWER in its own process: its URL (without /v1) and pid."""
    return app_process(_plain_app, "clawgate-bench-model", "fake model server")
