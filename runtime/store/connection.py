"""Connecting to Redis, or to the embedded in-process store when no server is configured."""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.asyncio import Redis

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 100  # per process
POOL_TIMEOUT = 5.0  # seconds a command may wait for a connection before it fails
CONNECT_TIMEOUT = 2.0
# A stalled server must fail a command, not hang it; longer than the workers' 1 s blocking
# reads and than any script clawgate runs.
SOCKET_TIMEOUT = 10.0

EMBEDDED_WARNING = (
    "REDIS_URL is not set: using the embedded in-process store "
    "(single process, nothing is persisted; set REDIS_URL for real use)"
)


def connect(url: str | None) -> Redis:
    """A `redis.asyncio` client for `url`; without one, an embedded store speaking the same
    protocol (with Lua) so the same code runs with zero setup."""
    if url:
        # A blocking pool: under a burst, a command waits for a free connection instead of
        # failing at once with "Too many connections" (redis-py's default pool holds 100), which
        # turned healthy load into 503s and "Redis unavailable" answers.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            decode_responses=True,
            health_check_interval=30,
            max_connections=MAX_CONNECTIONS,
            timeout=POOL_TIMEOUT,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=SOCKET_TIMEOUT,
        )
        return aioredis.Redis.from_pool(pool)
    import fakeredis  # noqa: TID251, PLC0415 - the one place the embedded store is chosen

    log.warning(EMBEDDED_WARNING)
    client: Redis = fakeredis.FakeAsyncRedis(decode_responses=True)
    return client
