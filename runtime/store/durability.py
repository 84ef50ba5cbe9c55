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


class DurabilityError(Exception):
    """CLAWGATE_INGEST_DURABILITY=fsync cannot be kept with this Redis: said at start."""


async def fsync_mode(redis: Redis) -> str:
    """How to acknowledge an input only once it is on disk (CLAWGATE_INGEST_DURABILITY=fsync):
    "always" when Redis syncs every write before answering (appendfsync always), "waitaof"
    when each write must be waited for (WAITAOF, Redis 7.2 and later, with AOF on)."""
    try:
        async with asyncio.timeout(CHECK_SECONDS * 5):
            config = await redis.config_get("append*")
            version = str((await redis.info("server")).get("redis_version", "0"))
    except (RedisError, OSError, TimeoutError) as exc:
        raise DurabilityError(f"cannot read Redis's persistence settings ({exc})") from exc
    if str(config.get("appendonly", "")).lower() != "yes":
        raise DurabilityError("Redis keeps no append-only file (appendonly no)")
    if str(config.get("appendfsync", "")).lower() == "always":
        return "always"
    major, minor, *_ = (int(part) for part in [*version.split("."), "0", "0"])
    if (major, minor) >= (7, 2):
        return "waitaof"
    raise DurabilityError(
        f"Redis {version} syncs its append-only file only now and then "
        f"(appendfsync {config.get('appendfsync')}) and has no WAITAOF (7.2+): set "
        "appendfsync always"
    )


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
