"""The slow tier of tests/component/test_durability.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from runtime.store.durability import (
    durability_warnings,
)


@pytest.mark.e2e  # waits out timers or runs processes: the slow tier
async def test_a_redis_that_does_not_answer_is_said_so_not_called_a_refusal() -> None:
    async def swallow(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)  # accepts, never answers
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = aioredis.from_url(f"redis://127.0.0.1:{port}/0")
    try:
        assert await durability_warnings(client) == [
            "cannot check Redis's persistence settings: Redis did not answer within 1 s"
        ]
    finally:
        await client.aclose()
        server.close()
