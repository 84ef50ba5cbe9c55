"""Connecting to Redis, or to the embedded in-process store when no server is configured."""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.asyncio import Redis

log = logging.getLogger(__name__)

EMBEDDED_WARNING = (
    "REDIS_URL is not set: using the embedded in-process store "
    "(single process, nothing is persisted; set REDIS_URL for real use)"
)


def connect(url: str | None) -> Redis:
    """A `redis.asyncio` client for `url`; without one, an embedded store speaking the same
    protocol (with Lua) so the same code runs with zero setup."""
    if url:
        return aioredis.from_url(url, decode_responses=True, health_check_interval=30)
    import fakeredis  # noqa: TID251, PLC0415 - the one place the embedded store is chosen

    log.warning(EMBEDDED_WARNING)
    client: Redis = fakeredis.FakeAsyncRedis(decode_responses=True)
    return client
