"""POST raw bytes to an app's HTTP endpoint, from async tests (aiohttp) or blocking (urllib);
serve a small aiohttp app of a test's own on a free local port."""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Mapping

import aiohttp
from aiohttp import web


@contextlib.asynccontextmanager
async def serving_app(app: web.Application) -> AsyncIterator[str]:
    """`app` served on 127.0.0.1 at a free port, for the block; yields its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def post_bytes(
    url: str, body: bytes, headers: Mapping[str, str], *, timeout: float = 10.0
) -> tuple[int, str]:
    """POST `body` with `headers`; returns (status, response text)."""
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
        session.post(url, data=body, headers=dict(headers)) as resp,
    ):
        return resp.status, await resp.text()


def post_bytes_sync(
    url: str, body: bytes, headers: Mapping[str, str], *, timeout: float = 10.0
) -> tuple[int, str]:
    """Blocking `post_bytes` (urllib, no proxies); HTTP errors are returned, not raised."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8")
