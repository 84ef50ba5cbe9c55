"""The Redis a bench runs against, as its settings name it: one server or a Redis Cluster
(CLAWGATE_REDIS_CLUSTER), and the inbox partitions (CLAWGATE_INBOX_PARTITIONS) the processes
under test use. The bench's own clients and the server it starts see the same."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from runtime.store.connection import REDIS_FAILURES, connect
from runtime.store.keys import Keys


@dataclass(frozen=True, slots=True)
class BenchStore:
    url: str
    cluster: bool = False
    partitions: int = 1

    def connect(self) -> Redis:
        return connect(self.url, cluster=self.cluster)

    def env(self) -> dict[str, str]:
        """What a process under test is told (whatever the bench's own environment says)."""
        return {
            "REDIS_URL": self.url,
            "CLAWGATE_REDIS_CLUSTER": "true" if self.cluster else "false",
            "CLAWGATE_INBOX_PARTITIONS": str(self.partitions),
        }

    def streams(self, prefix: str) -> list[str]:
        keys = Keys(prefix)
        return [keys.inbox_stream(p, self.partitions) for p in range(self.partitions)]

    def describe(self) -> str:
        if not self.cluster:
            return f"redis {self.url}, {self.partitions} inbox partition(s)"
        return f"the Redis Cluster at {self.url}, {self.partitions} inbox partitions"


async def queued(redis: Redis, streams: list[str]) -> int:
    """Inputs in the inbox's streams (handled ones are deleted from them)."""
    pipe = redis.pipeline(transaction=False)
    for stream in streams:
        pipe.xlen(stream)
    return sum(int(n) for n in await pipe.execute())


async def masters_of(redis: Redis, keys: list[str]) -> list[str]:
    """The master serving each key ("127.0.0.1:7001"); one name for a single Redis."""
    if not isinstance(redis, RedisCluster):
        return ["redis"] * len(keys)
    cluster = cast(RedisCluster, redis)
    return [str(getattr(cluster.get_node_from_key(key), "name", "?")) for key in keys]


async def redis_cpu_s(redis: Redis) -> float | None:
    """CPU seconds Redis used so far (INFO cpu), summed over a cluster's masters."""
    with contextlib.suppress(*REDIS_FAILURES, OSError):
        if isinstance(redis, RedisCluster):
            nodes = await redis.info("cpu", target_nodes=RedisCluster.PRIMARIES)
            infos = list(cast(dict[str, dict[str, float]], nodes).values())
        else:
            infos = [await redis.info("cpu")]
        return sum(float(i["used_cpu_user"]) + float(i["used_cpu_sys"]) for i in infos)
    return None
