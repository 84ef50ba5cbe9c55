"""Connecting to Redis, or to the embedded in-process store when no server is configured."""

from __future__ import annotations

import logging
import os
import traceback
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncCoreCommands
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import CrossSlotTransactionError, RedisClusterException, RedisError

# What an outage is (worth waiting out, in place) is runtime/outage.py's; imported from here
# too, with the rest of what talking to Redis needs.
from runtime.outage import CLUSTER_OUTAGES, OUTAGES

__all__ = ["CLUSTER_OUTAGES", "OUTAGES"]  # and what is defined below

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 100  # per process
# The cluster client has no blocking pool: a node's connections beyond this fail at once
# (MaxConnectionsError). Per node, and roomy, so a burst queues on sockets, not in errors.
CLUSTER_MAX_CONNECTIONS = 512
POOL_TIMEOUT = 5.0  # seconds a command may wait for a connection before it fails
CONNECT_TIMEOUT = 2.0
# A stalled server must fail a command, not hang it; longer than the workers' 1 s blocking
# reads and than any script clawgate runs.
SOCKET_TIMEOUT = 10.0

EMBEDDED_WARNING = (
    "REDIS_URL is not set: using the embedded in-process store "
    "(single process, nothing is persisted; set REDIS_URL for real use)"
)


# Any failure to talk to Redis, a cluster's included: what a command reports in one line.
REDIS_FAILURES: tuple[type[Exception], ...] = (RedisError, RedisClusterException)
# Redis failing, or the network to it.
REDIS_DOWN: tuple[type[Exception], ...] = (*REDIS_FAILURES, OSError)


# Where redis-py's transport lives: an AttributeError or TypeError raised there is a
# connection torn down under a command, not a bug of the caller's.
_TRANSPORT = tuple(
    os.path.join(*parts)
    for parts in (
        ("redis", "asyncio", "connection.py"),
        ("redis", "_parsers", ""),
        ("asyncio", "streams.py"),
        ("asyncio", "selector_events.py"),
    )
)


def _torn_down(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and any(part in frames[-1].filename for part in _TRANSPORT)


def _as_outage(exc: Exception) -> Exception:
    """When one node fails, redis-py's cluster client closes the connections of every node,
    also those other commands are using at that moment: they fail with AttributeError or
    TypeError from deep in the transport ('NoneType' object has no attribute 'writelines').
    Those are said as what they are, a lost connection: retried like one, never taken for a
    failed job."""
    if isinstance(exc, (AttributeError, TypeError)) and _torn_down(exc):
        return RedisConnectionError(f"cluster connection reset while in use ({exc})")
    return exc


class _ClusterPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        try:
            replies = await super().execute(raise_on_error, allow_redirections)
        except (AttributeError, TypeError) as exc:
            raise _as_outage(exc) from exc
        return [_as_outage(r) if isinstance(r, Exception) else r for r in replies]


# KEYS: each command's key   ARGV: per command its argument count, then its arguments
_TRANSACTION = """
local replies, at = {}, 1
for c = 1, #KEYS do
  local count = tonumber(ARGV[at])
  replies[c] = redis.call(unpack(ARGV, at + 1, at + count))
  at = at + count + 1
end
return replies
"""


class _SlotTransaction(AsyncCoreCommands):
    """`pipeline(transaction=True)` on a cluster: the queued commands run as one script on
    their slot's master, atomic like MULTI/EXEC and in one round trip. redis-py's own cluster
    transaction runs every queued command in a new thread with its own event loop, which
    blocks the caller's loop and fails outright ("bound to a different event loop") when the
    client must find the cluster's masters again, as it must after a master failed. Every
    command names its key first (all clawgate sends in a transaction does) and all keys share
    one slot."""

    def __init__(self, client: _Cluster) -> None:
        self.client = client
        self.queued: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def execute_command(self, *args: Any, **options: Any) -> _SlotTransaction:
        self.queued.append((args, options))
        return self

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        queued, self.queued = self.queued, []
        if not queued:
            return []
        keys = [args[1] for args, _ in queued]
        if len({self.client.keyslot(key) for key in keys}) != 1:
            raise CrossSlotTransactionError("a transaction's keys must share one slot")
        argv = [item for args, _ in queued for item in (len(args), *args)]
        replies = await self.client.eval(_TRANSACTION, len(keys), *keys, *argv)
        callbacks = self.client.get_default_node().response_callbacks
        results = []
        for (args, options), reply in zip(queued, replies, strict=True):
            name = str(args[0]).upper()
            kept = {k: v for k, v in options.items() if k != "keys"}  # as redis-py parses
            results.append(callbacks[name](reply, **kept) if name in callbacks else reply)
        return results

    async def __aenter__(self) -> _SlotTransaction:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.queued = []


class _Cluster(RedisCluster):
    """redis-py's cluster client, its transport's races said as connection errors and its
    transactions run as scripts."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute_command(*args, **kwargs)
        except (AttributeError, TypeError) as exc:
            raise _as_outage(exc) from exc

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        if shard_hint:
            raise RedisClusterException("shard_hint is deprecated in cluster mode")
        if transaction:
            return _SlotTransaction(self)  # type: ignore[abstract]
        return _ClusterPipeline(self, transaction)  # type: ignore[abstract]


def connect(url: str | None, cluster: bool = False) -> Redis:
    """A `redis.asyncio` client for `url`; without one, an embedded store speaking the same
    protocol (with Lua) so the same code runs with zero setup. `cluster`: `url` names any node
    of a Redis Cluster (CLAWGATE_REDIS_CLUSTER), and commands go to the node of their key's
    slot."""
    if url and cluster:
        cluster_client = _Cluster.from_url(
            url,
            decode_responses=True,
            max_connections=CLUSTER_MAX_CONNECTIONS,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=SOCKET_TIMEOUT,
            # No command sent again by the client itself: a write the master made durable
            # before its reply was lost (a master killed) would be done twice (an RPUSH to a
            # history). The outage reaches the caller, whose job is tried again by the worker
            # and retaken from what Redis holds.
            retry=Retry(NoBackoff(), 0),
        )
        # Typed as Redis: the code uses the commands both clients share (RedisCluster is no
        # subclass); every multi-key script and transaction keeps to one slot (keys.py).
        return cast(Redis, cluster_client)
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


def is_cluster(redis: Redis) -> bool:
    return isinstance(redis, RedisCluster)


def is_embedded(redis: Redis) -> bool:
    """The embedded store (no REDIS_URL): it keeps nothing and answers no INFO."""
    return type(redis).__module__.startswith("fakeredis")
