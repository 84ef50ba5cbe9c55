"""The model client's bytes over aiohttp (runtime.providers.aiohttp_transport) and how an
answer is read: what the server receives, how failures are named (refused is "cannot reach",
slow is "did not answer in time", a dropped answer is retried then "cannot reach"), gzip and
streams, and answers that bend the schema as compatible servers do. The real `openai` client
against small aiohttp servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gc
import gzip
import json
import socket
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from runtime.models import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolSpec,
    ToolStatus,
    UserMessage,
)
from runtime.providers.base import ProviderError
from runtime.providers.openai_provider import OpenAIProvider, to_openai_message, to_openai_tool

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ANSWER: dict[str, Any] = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        return f"http://{host}:{port}/v1"

    yield start
    for runner in runners:
        await runner.cleanup()


def provider(base_url: str, retries: int = 0, timeout: float = 5.0) -> OpenAIProvider:
    return OpenAIProvider(
        "m", api_key="sk-t", base_url=base_url, max_retries=retries, timeout=timeout
    )


async def ask(p: OpenAIProvider) -> str | None:
    try:
        return (await p.complete([UserMessage(content="héllo")], [])).content
    finally:
        await p.client.close()


async def test_the_server_gets_the_request_and_the_answer_is_read(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    seen: list[tuple[dict[str, str], bytes]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((dict(request.headers), await request.read()))
        return web.json_response(ANSWER)

    assert await ask(provider(await serve(handler))) == "hi"
    (headers, body) = seen[0]
    assert headers["Authorization"] == "Bearer sk-t"
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"model": "m", "messages": [{"role": "user", "content": "héllo"}]}
    assert "héllo".encode() in body  # as the client writes it: not ASCII-escaped


async def test_a_gzipped_answer_is_read(serve: Callable[[Handler], Awaitable[str]]) -> None:
    async def handler(_: web.Request) -> web.Response:
        body = gzip.compress(json.dumps(ANSWER).encode())
        headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        return web.Response(body=body, headers=headers)

    assert await ask(provider(await serve(handler))) == "hi"


async def test_an_answer_that_bends_the_schema_is_read_leniently(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    bent = {k: v for k, v in ANSWER.items() if k not in ("created", "object")}
    bent["choices"] = [ANSWER["choices"][0] | {"finish_reason": "eos"}]

    async def handler(_: web.Request) -> web.Response:
        return web.json_response(bent)

    assert await ask(provider(await serve(handler))) == "hi"


@pytest.mark.parametrize("body", [b"<html>busy</html>", b"[1, 2]"], ids=["not-json", "array"])
async def test_an_answer_that_is_not_a_json_object_is_malformed(
    serve: Callable[[Handler], Awaitable[str]], body: bytes
) -> None:
    async def handler(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    with pytest.raises(ProviderError, match="malformed answer"):
        await ask(provider(await serve(handler)))


async def test_a_refused_connection_is_cannot_reach() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ProviderError, match="cannot reach the model server") as failed:
        await ask(provider(f"http://127.0.0.1:{port}/v1"))
    assert failed.value.code == "unreachable"


async def test_a_slow_answer_is_a_timeout(serve: Callable[[Handler], Awaitable[str]]) -> None:
    async def handler(_: web.Request) -> web.Response:
        await asyncio.sleep(1)
        return web.json_response(ANSWER)

    with pytest.raises(ProviderError, match="did not answer in time") as failed:
        await ask(provider(await serve(handler), timeout=0.2))
    assert failed.value.code == "timeout"


async def test_a_dropped_answer_is_retried_then_cannot_reach(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    calls = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        if calls <= 2:  # headers promise a body that never comes: the connection drops
            response = web.StreamResponse(headers={"Content-Length": "500"})
            await response.prepare(request)
            await response.write(b'{"id": ')
            assert request.transport is not None
            request.transport.close()
            return response
        return web.json_response(ANSWER)

    base = await serve(handler)
    assert await ask(provider(base, retries=2)) == "hi"  # the client retried twice
    assert calls == 3
    calls = 0
    with pytest.raises(ProviderError, match="cannot reach the model server"):
        await ask(provider(base, retries=1))
    assert calls == 2


async def test_a_proxy_from_the_environment_carries_the_request(
    serve: Callable[[Handler], Awaitable[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    targets: list[str] = []

    async def proxy(request: web.Request) -> web.Response:  # an HTTP proxy gets absolute URLs
        targets.append(str(request.url))
        return web.json_response(ANSWER)

    proxy_url = (await serve(proxy)).removesuffix("/v1")
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, proxy_url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    # A host that does not resolve: only the proxy can reach it.
    assert await ask(provider("http://model.invalid/v1")) == "hi"
    assert targets == ["http://model.invalid/v1/chat/completions"]


async def test_each_step_sends_the_whole_window_as_the_client_would_encode_it(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    """A run's second step re-sends the first step's messages (their JSON kept from it) and
    the new ones: byte for byte what json.dumps of the whole request gives."""
    bodies: list[bytes] = []

    async def handler(request: web.Request) -> web.Response:
        bodies.append(await request.read())
        return web.json_response(ANSWER)

    p = provider(await serve(handler))
    tools = [ToolSpec(name="mcp.fs.read", description="Read a file «here»", parameters={})]
    window: list[Message] = [
        UserMessage(content='say "hi" ✓'),
        AssistantMessage(tool_calls=[ToolCall(id="c1", name="mcp.fs.read", arguments="{}")]),
        ToolMessage(
            tool_call_id="c1", name="mcp.fs.read", content="ok", status=ToolStatus.COMPLETED
        ),
    ]
    await p.complete(window[:2], tools)
    await p.complete(window, tools)
    await p.client.close()
    for sent, count in zip(bodies, (2, 3), strict=True):
        whole = {
            "model": "m",
            "messages": [to_openai_message(m) for m in window[:count]],
            "tools": [to_openai_tool(t) for t in tools],
        }
        expected = json.dumps(whole, ensure_ascii=False, separators=(",", ":")).encode()
        assert sent == expected


RawHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def raw() -> AsyncIterator[Callable[[RawHandler], Awaitable[str]]]:
    """A bare TCP server speaking (or failing to speak) HTTP: its base URL."""
    servers: list[asyncio.Server] = []

    async def start(handler: RawHandler) -> str:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"

    yield start
    for server in servers:
        server.close()


def bad_chunk(stream: bool) -> RawHandler:
    """Headers, one chunk of the body, then a chunk size that is not one; the connection
    stays open (as a confused proxy may leave it)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        kind = b"text/event-stream" if stream else b"application/json"
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n5\r\n"
            + (b"data:" if stream else b'{"id"')
            + b"\r\n"
        )
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"zz\r\n")  # not a chunk size
        await writer.drain()
        await asyncio.sleep(3)
        writer.close()

    return handler


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_body_that_breaks_http_ends_in_time(
    raw: Callable[[RawHandler], Awaitable[str]], stream: bool
) -> None:
    p = OpenAIProvider(
        "m", base_url=await raw(bad_chunk(stream)), max_retries=0, timeout=0.5, stream=stream
    )

    async def noted(_: str) -> None:
        pass

    try:
        async with asyncio.timeout(2.5):  # without a timer of its own, it waited forever
            with pytest.raises(ProviderError) as failed:
                await p.complete_streaming([UserMessage(content="hi")], [], noted)
    finally:
        await p.aclose()
    assert failed.value.code in ("timeout", "unreachable", "stream_broken", "malformed_answer")


async def test_a_server_that_takes_no_request_body_is_a_timeout(
    raw: Callable[[RawHandler], Awaitable[str]],
) -> None:
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(4)  # reads nothing: the request's body fills the socket buffers
        writer.close()

    p = provider(await raw(deaf), timeout=0.4)
    big = UserMessage(content="x" * (16 * 1024 * 1024))
    try:
        async with asyncio.timeout(3):  # aiohttp has no write timeout of its own
            with pytest.raises(ProviderError, match="did not answer in time"):
                await p.complete([big], [])
    finally:
        await p.aclose()


@pytest.mark.parametrize(
    "headers",
    [{"x-long": "v" * 9000}, {f"x-h{i}": str(i) for i in range(150)}],
    ids=["a-9-kB-header", "150-headers"],
)
async def test_long_and_many_headers_are_read_as_httpx_reads_them(
    serve: Callable[[Handler], Awaitable[str]], headers: dict[str, str]
) -> None:
    async def handler(_: web.Request) -> web.Response:
        return web.json_response(ANSWER, headers=headers)

    assert await ask(provider(await serve(handler))) == "hi"


def test_a_provider_serves_one_event_loop_after_another() -> None:
    """As `clawgate` commands and tests do: asyncio.run twice with the same provider."""

    async def server_and_ask(p: OpenAIProvider | None) -> tuple[OpenAIProvider, str | None]:
        async def handler(_: web.Request) -> web.Response:
            return web.json_response(ANSWER)

        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        p = p or provider(f"http://{host}:{port}/v1")
        p.client.base_url = f"http://{host}:{port}/v1"
        try:
            answer = (await p.complete([UserMessage(content="hi")], [])).content
        finally:
            await runner.cleanup()
        return p, answer

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        p, first = asyncio.run(server_and_ask(None))
        _, second = asyncio.run(server_and_ask(p))
        assert (first, second) == ("hi", "hi")
        asyncio.run(p.aclose())
        gc.collect()  # the first loop's session, left behind: said to be unclosed, if it were
    assert not [w for w in seen if "Unclosed" in str(w.message)]


async def test_a_model_that_takes_images_is_sent_them_as_they_are_now(
    serve: Callable[[Handler], Awaitable[str]], tmp_path: Path
) -> None:
    bodies: list[dict[str, Any]] = []

    async def handler(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        return web.json_response(ANSWER)

    p = OpenAIProvider("m", base_url=await serve(handler), max_retries=0, images=tmp_path)
    (tmp_path / "shot.png").write_bytes(b"first")
    window: list[Message] = [UserMessage(content="see", images=["shot.png"])]
    await p.complete(window, [])
    (tmp_path / "shot.png").write_bytes(b"second")  # changed by the run's own tool, say
    window.append(AssistantMessage(content="seen"))
    await p.complete(window, [])
    await p.aclose()
    urls = [b["messages"][0]["content"][1]["image_url"]["url"] for b in bodies]
    assert [u.rsplit(",", 1)[1] for u in urls] == ["Zmlyc3Q=", "c2Vjb25k"]  # base64 of each
