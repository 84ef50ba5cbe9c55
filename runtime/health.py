"""The facts behind the console's Health page that Redis holds: the workers (including those
that died or stopped lately, shown as gone rather than dropped), each inbox partition's depth
and lag, and the Redis server itself (memory, persistence, durability warnings). The process
that serves the page adds what only it knows (bot/health_facts.py) into a `HealthReport`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from runtime.mcp.state import ServerState
from runtime.ownership.liveness_mark import ALIVE, GONE
from runtime.queue.inbox import Inbox, Polled
from runtime.queue.worker import WORKER_SILENCE
from runtime.store.connection import EMBEDDED_WARNING, is_cluster, is_embedded
from runtime.store.durability import durability_warnings

# alive: its liveness mark is renewed and it polls; not polling: its mark is renewed but its
# reading stopped (stuck); stopped: it said so; taken over: it stalled past its liveness time
# and its jobs went to another worker; gone: its mark lapsed (killed, or cut off from Redis).
WorkerState = Literal["alive", "not polling", "stopped", "taken over", "gone"]


@dataclass(frozen=True, slots=True)
class WorkerFact:
    id: str
    host: str | None  # from the id (host:pid:random) when it has that shape
    pid: int | None
    polled_ago_s: float  # since it last said it polls
    state: WorkerState

    @property
    def alive(self) -> bool:
        return self.state == "alive"

    @property
    def gone(self) -> bool:
        """Its liveness mark is no longer renewed: another worker takes (or took) its jobs."""
        return self.state in ("stopped", "taken over", "gone")


@dataclass(frozen=True, slots=True)
class PartitionFact:
    partition: int
    waiting: int  # not read by any worker yet
    in_progress: int  # read, not finished
    lag_s: float | None  # how long the oldest waiting input has waited; None: nothing waits


@dataclass(frozen=True, slots=True)
class RedisNodeFact:
    """One server (each master of a cluster), from its INFO."""

    address: str
    version: str
    role: str
    used_memory_human: str
    maxmemory: int  # bytes; 0: no limit
    maxmemory_policy: str
    aof_enabled: bool
    last_save_ago_s: float | None  # since the last RDB snapshot was saved
    last_save_ok: bool  # the last RDB snapshot (rdb_last_bgsave_status)
    aof_write_ok: bool  # the last append-only file write (aof_last_write_status)


@dataclass(frozen=True, slots=True)
class RedisFact:
    cluster: bool
    nodes: list[RedisNodeFact]
    warnings: list[str]  # what could be lost (runtime/store/durability.py); empty: nothing


@dataclass(frozen=True, slots=True)
class QueueFacts:
    """What Redis says of the workers and the inbox, whichever process asks."""

    workers: list[WorkerFact]
    partitions: list[PartitionFact]
    redis: RedisFact


@dataclass(frozen=True, slots=True)
class ProcessFact:
    """The process that serves the page."""

    role: Literal["serve", "worker"]
    worker_id: str | None  # its in-process worker's id; None: it only takes inputs
    worker_polling: bool | None  # that worker reads (as /readyz says); None: no worker
    sandbox: str  # how bash commands are contained (Sandbox.describe)
    sandbox_warning: str | None  # why unapproved commands may not run here (Sandbox.missing)
    child_worker_pid: int | None = None  # serve's worker in a child process, while it runs


@dataclass(frozen=True, slots=True)
class ModelFact:
    name: str  # the default model, or "offline demo model"
    reachable: bool
    detail: str
    checked_ago_s: float  # the answer is cached: how old it is


@dataclass(frozen=True, slots=True)
class HealthReport:
    """Everything the Health page shows."""

    process: ProcessFact
    problems: list[str]  # what keeps this process from being ready (/readyz); empty: ready
    warnings: list[str]  # degraded but working (no sandbox, Redis may lose writes)
    queue: QueueFacts | None  # None: Redis did not answer (the problems say so)
    mcp: list[ServerState]  # the policy file's MCP servers, supervised in this process
    model: ModelFact

    @property
    def ready(self) -> bool:
        return not self.problems


_MARKS: dict[str | None, WorkerState] = {GONE: "stopped", "fenced": "taken over", None: "gone"}


def worker_fact(polled: Polled, silence_s: float = WORKER_SILENCE) -> WorkerFact:
    host, pid, _ = [*polled.name.split(":", 2), "", ""][:3]
    ago = polled.polled_ms_ago / 1000
    if polled.mark == ALIVE:
        state: WorkerState = "alive" if ago < silence_s else "not polling"
    else:
        state = _MARKS.get(polled.mark, "gone")
    shaped = pid.isdigit()
    return WorkerFact(
        polled.name, host if shaped else None, int(pid) if shaped else None, ago, state
    )


async def queue_facts(inbox: Inbox, silence_s: float = WORKER_SILENCE) -> QueueFacts:
    """The workers (alive first, then by how recently they polled), the partitions, Redis."""
    workers = [worker_fact(p, silence_s) for p in await inbox.workers()]
    workers.sort(key=lambda w: (not w.alive, w.polled_ago_s))
    partitions = [
        PartitionFact(
            d.partition,
            d.waiting,
            d.in_progress,
            None if d.oldest_waiting_ms is None else max(d.oldest_waiting_ms, 0) / 1000,
        )
        for d in await inbox.partition_depths()
    ]
    return QueueFacts(workers, partitions, await redis_fact(inbox.redis))


async def redis_fact(redis: Redis) -> RedisFact:
    """INFO of the server, or of each master of a cluster (an input is as safe as its
    master), and the durability warnings."""
    if is_embedded(redis):
        return RedisFact(cluster=False, nodes=[], warnings=[EMBEDDED_WARNING])
    if is_cluster(redis):
        cluster = cast(RedisCluster, redis)
        infos = cast(dict[str, dict[str, Any]], await cluster.info(target_nodes=cluster.PRIMARIES))
    else:
        kwargs = redis.connection_pool.connection_kwargs
        address = f"{kwargs.get('host', '')}:{kwargs.get('port', '')}".strip(":")
        infos = {address: await redis.info()}
    nodes = [_node(address, info) for address, info in sorted(infos.items())]
    return RedisFact(is_cluster(redis), nodes, await durability_warnings(redis))


def _node(address: str, info: dict[str, Any]) -> RedisNodeFact:
    saved = int(info.get("rdb_last_save_time") or 0)
    return RedisNodeFact(
        address=address,
        version=str(info.get("redis_version", "?")),
        role=str(info.get("role", "?")),
        used_memory_human=str(info.get("used_memory_human", "?")),
        maxmemory=int(info.get("maxmemory") or 0),
        maxmemory_policy=str(info.get("maxmemory_policy", "?")),
        aof_enabled=bool(int(info.get("aof_enabled") or 0)),
        last_save_ago_s=max(time.time() - saved, 0.0) if saved else None,
        last_save_ok=info.get("rdb_last_bgsave_status", "ok") == "ok",
        aof_write_ok=info.get("aof_last_write_status", "ok") == "ok",
    )
