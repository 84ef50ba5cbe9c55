"""A local OpenAI-compatible server that answers /v1/chat/completions from a script.

Each scripted step is either an assistant reply (text and/or tool calls) or an HTTP error.
Every request body is recorded so tests can check what the real `openai` client sent.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Step:
    content: str | None = None
    tool_calls: list[tuple[str, str, dict[str, Any] | str]] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0  # seconds before answering (a slow model)


def reply(content: str) -> Step:
    return Step(content=content)


def calls(*items: tuple[str, str, dict[str, Any] | str], content: str | None = None) -> Step:
    """Tool calls as (id, name, arguments); arguments may be raw text to test bad JSON."""
    return Step(content=content, tool_calls=list(items))


def error(status: int) -> Step:
    return Step(status=status)


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: list[Step] = []
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
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

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if not self.script:
            return web.json_response({"error": {"message": "script exhausted"}}, status=500)
        step = self.script.pop(0)
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.status != 200:
            return web.json_response(
                {"error": {"message": "scripted failure", "type": "server_error"}},
                status=step.status,
            )
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
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
                        "finish_reason": "tool_calls" if step.tool_calls else "stop",
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
