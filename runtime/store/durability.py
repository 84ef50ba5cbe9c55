"""Whether Redis keeps what clawgate hands it: pending approvals, checkpoints and accepted
messages live only there. Read from the server's own settings, said plainly, never assumed."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from runtime.store.connection import CLUSTER_OUTAGES, OUTAGES, is_cluster

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


UNCHECKED = "cannot check Redis's persistence settings"
CHECK_SECONDS = 1.0  # a Redis that does not answer this soon is reported as unknown


class DurabilityError(Exception):
    """CLAWGATE_INGEST_DURABILITY=fsync cannot be kept with this Redis: said at start."""


class DurabilityUnknown(DurabilityError):
    """Redis did not answer (or, on a cluster, not every master did): it cannot be told yet,
    which is an unreachable service, not a bad setting."""


_FAILED: tuple[type[Exception], ...] = (RedisError, OSError, TimeoutError, *CLUSTER_OUTAGES)
_UNREACHABLE: tuple[type[Exception], ...] = (*OUTAGES, OSError)
_STRENGTH = {"no": 0, "everysec": 1, "always": 2}


async def _append_config(redis: Redis) -> dict[str, Any]:
    """CONFIG GET append*; on a cluster every master's, and the weakest of them: an input is
    as safe as the master of its slot."""
    if not is_cluster(redis):
        return cast(dict[str, Any], await redis.config_get("append*"))
    cluster = cast(RedisCluster, redis)
    nodes = await cluster.config_get("append*", target_nodes=RedisCluster.PRIMARIES)
    configs = list(cast(dict[str, dict[str, Any]], nodes).values())
    if any(str(c.get("appendonly", "")).lower() != "yes" for c in configs):
        return {"appendonly": "no"}
    return min(configs, key=lambda c: _STRENGTH.get(str(c.get("appendfsync", "")).lower(), 0))


async def fsync_mode(redis: Redis) -> str:
    """How to acknowledge an input only once it is on disk (CLAWGATE_INGEST_DURABILITY=fsync):
    "always" when Redis syncs every write before answering (appendfsync always), "waitaof"
    when each write must be waited for (WAITAOF, Redis 7.2 and later, with AOF on)."""
    try:
        async with asyncio.timeout(CHECK_SECONDS * 5):
            config = await _append_config(redis)
            version = str((await redis.info("server")).get("redis_version", "0"))
    except _FAILED as exc:
        raise DurabilityUnknown(f"cannot read Redis's persistence settings ({exc})") from exc
    if str(config.get("appendonly", "")).lower() != "yes":
        raise DurabilityError("Redis keeps no append-only file (appendonly no)")
    if str(config.get("appendfsync", "")).lower() == "always":
        return "always"
    if is_cluster(redis):  # WAITAOF must follow the write on its connection: not through a cluster
        raise DurabilityError(
            f"a Redis Cluster master syncs its append-only file only now and then (appendfsync "
            f"{config.get('appendfsync')}): set appendfsync always on every master"
        )
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
            config = await _append_config(redis)
    except TimeoutError:  # not refused: not answered
        return [f"{UNCHECKED}: Redis did not answer within {CHECK_SECONDS:g} s"]
    except _UNREACHABLE as exc:
        return [f"{UNCHECKED}: Redis is unreachable ({exc})"]
    except _FAILED:
        return [UNKNOWN]
    if str(config.get("appendonly", "")).lower() != "yes":
        return [NO_AOF]
    if str(config.get("appendfsync", "")).lower() == "everysec":
        return [EVERYSEC]
    return []
