"""clawgate reads whether Redis keeps what it is handed, and says so (issue 14, item 6)."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from runtime.store.durability import EVERYSEC, NO_AOF, UNKNOWN, durability_warnings


async def test_what_redis_could_lose_is_read_from_its_own_settings(
    redis: aioredis.Redis,
) -> None:
    assert await durability_warnings(redis) == [NO_AOF]  # the tests' Redis keeps nothing
    try:
        await redis.config_set("appendonly", "yes")
        await redis.config_set("appendfsync", "everysec")
        assert await durability_warnings(redis) == [EVERYSEC]
        await redis.config_set("appendfsync", "always")
        assert await durability_warnings(redis) == []
    finally:
        await redis.config_set("appendfsync", "everysec")
        await redis.config_set("appendonly", "no")


async def test_a_redis_that_will_not_say_is_reported_as_unknown() -> None:
    async def swallow(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)  # accepts, never answers
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = aioredis.from_url(f"redis://127.0.0.1:{port}/0")
    try:
        assert await durability_warnings(client) == [UNKNOWN]
    finally:
        await client.aclose()
        server.close()
