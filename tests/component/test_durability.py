"""clawgate reads whether Redis keeps what it is handed, and says so (issue 14, item 6)."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from runtime.queue.inbox import Inbox, NotDurable
from runtime.store.durability import (
    EVERYSEC,
    NO_AOF,
    DurabilityError,
    durability_warnings,
    fsync_mode,
)
from runtime.store.keys import Keys
from tests.conftest import CLUSTER
from tests.support import PREFIX


async def config_set(redis: aioredis.Redis, name: str, value: str) -> None:
    """On every master of a cluster (clawgate reads them all and judges by the weakest)."""
    if CLUSTER:
        await redis.config_set(name, value, target_nodes=RedisCluster.PRIMARIES)
    else:
        await redis.config_set(name, value)


async def test_what_redis_could_lose_is_read_from_its_own_settings(
    redis: aioredis.Redis,
) -> None:
    assert await durability_warnings(redis) == [NO_AOF]  # the tests' Redis keeps nothing
    try:
        await config_set(redis, "appendonly", "yes")
        await config_set(redis, "appendfsync", "everysec")
        assert await durability_warnings(redis) == [EVERYSEC]
        await config_set(redis, "appendfsync", "always")
        assert await durability_warnings(redis) == []
    finally:
        await config_set(redis, "appendfsync", "everysec")
        await config_set(redis, "appendonly", "no")


async def test_fsync_ingest_needs_redis_to_sync_every_write(redis: aioredis.Redis) -> None:
    """CLAWGATE_INGEST_DURABILITY=fsync: refused (serve says why at start) unless every
    acknowledged input is on disk: appendfsync always, or WAITAOF on Redis 7.2+."""
    with pytest.raises(DurabilityError, match="appendonly no"):
        await fsync_mode(redis)
    version = str((await redis.info("server"))["redis_version"])
    newer = tuple(int(p) for p in version.split(".")[:2]) >= (7, 2)
    try:
        await config_set(redis, "appendonly", "yes")
        await config_set(redis, "appendfsync", "everysec")
        if newer and not CLUSTER:  # WAITAOF cannot follow a write through a cluster client
            assert await fsync_mode(redis) == "waitaof"
        else:
            with pytest.raises(DurabilityError, match="appendfsync always"):
                await fsync_mode(redis)
        await config_set(redis, "appendfsync", "always")
        assert await fsync_mode(redis) == "always"
    finally:
        await config_set(redis, "appendfsync", "everysec")
        await config_set(redis, "appendonly", "no")


async def test_an_inbox_that_waits_for_the_disk_is_told_when_redis_cannot_confirm(
    redis: aioredis.Redis,
) -> None:
    """WAITAOF answers 0 local copies when Redis keeps no append-only file: the put fails
    (the platform is answered 503 and retries) instead of acknowledging a volatile write."""
    version = str((await redis.info("server"))["redis_version"])
    if tuple(int(p) for p in version.split(".")[:2]) < (7, 2):
        with pytest.raises(Exception, match="unknown command"):
            await Inbox(redis, Keys(PREFIX), wait_aof=True).put("s1", "{}", ["k1"])
        return
    with pytest.raises(NotDurable):
        await Inbox(redis, Keys(PREFIX), wait_aof=True).put("s1", "{}", ["k1"])
