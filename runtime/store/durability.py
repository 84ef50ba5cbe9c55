"""Whether Redis keeps what clawgate hands it: pending approvals, checkpoints and accepted
messages live only there. Read from the server's own settings, said plainly, never assumed."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis
from redis.exceptions import RedisError

NO_AOF = (
    "Redis keeps no append-only file (appendonly no): a Redis restart loses pending approvals, "
    "checkpoints and accepted messages"
)
EVERYSEC = (
    "Redis syncs its append-only file once a second (appendfsync everysec): a crash of the "
    "Redis host can lose the last second of accepted messages and decisions"
)
UNKNOWN = (
    "cannot read Redis's persistence settings (CONFIG GET refused, as managed services do): "
    "make sure it keeps an append-only file or replicas"
)


CHECK_SECONDS = 1.0  # a Redis that does not answer this soon is reported as unknown


async def durability_warnings(redis: Redis) -> list[str]:
    """What could be lost, from CONFIG GET appendonly / appendfsync; empty when Redis syncs
    every write (appendfsync always)."""
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            config = await redis.config_get("append*")
    except (RedisError, OSError, TimeoutError):
        return [UNKNOWN]
    if str(config.get("appendonly", "")).lower() != "yes":
        return [NO_AOF]
    if str(config.get("appendfsync", "")).lower() == "everysec":
        return [EVERYSEC]
    return []
