"""clawgate on a real local Redis Cluster of three masters (tests/cluster.py, its own, with
AOF): the inbox partitions spread over the masters with each partition's keys on one slot,
and a master killed and restarted mid-traffic loses no message and runs none twice.

The rest of the suite runs against a cluster too with TEST_REDIS_CLUSTER=1 (.ci/run)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import cast

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import CrossSlotTransactionError

from bot.settings import CLUSTER_INBOX_PARTITIONS, Settings
from runtime.agent import Runtime
from runtime.approval.store import ApprovalStore
from runtime.models import Actor, ConversationRef
from runtime.providers.demo import DemoProvider
from runtime.queue.inbound import Inbound
from runtime.queue.inbox import Inbox, Job
from runtime.queue.ingest import Ingest, IngestUnavailable
from runtime.queue.worker import Worker
from runtime.store.connection import connect
from runtime.store.durability import EVERYSEC, durability_warnings, fsync_mode
from runtime.store.keys import Keys, inbox_tag
from tests.cluster import LocalCluster
from tests.support import PREFIX, make_runtime

pytestmark = pytest.mark.e2e  # its own cluster, a master restarted: the slow tier

ALICE = Actor(platform="slack", user_id="U1")


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[LocalCluster]:
    try:
        cluster = LocalCluster(aof=True).start()
    except RuntimeError as exc:  # redis-server or redis-cli missing, or it did not start
        pytest.fail(f"the local Redis Cluster did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def cluster_redis(local_cluster: LocalCluster) -> AsyncIterator[Redis]:
    local_cluster.wait_ok()  # a test that restarted a master left it whole again
    client = connect(local_cluster.url, cluster=True)
    await client.flushdb()
    yield client
    await client.aclose()


def _slot(redis: Redis, key: str) -> int:
    return int(cast(RedisCluster, redis).keyslot(key))


def _master(redis: Redis, key: str) -> str:
    node = cast(RedisCluster, redis).get_node_from_key(key)
    assert node is not None
    return str(node.name)


def _inbound(session: str, n: int) -> Inbound:
    return Inbound(
        platform="slack",
        event_id=f"ev-{session}-{n}",
        dedupe_keys=(f"event:{session}:{n}", f"message:{session}:{n}"),
        session=session,
        conversation=ConversationRef(platform="slack", id=session),
        actor=ALICE,
        text=f"read f{n}.txt",
    )


def test_the_cluster_settings() -> None:
    single = Settings(REDIS_URL="redis://127.0.0.1:6379/0")
    assert (single.redis_cluster, single.partitions) == (False, 1)  # today's layout, unchanged
    cluster = Settings(REDIS_URL="redis://10.0.0.5:7000", CLAWGATE_REDIS_CLUSTER="true")
    assert cluster.partitions == CLUSTER_INBOX_PARTITIONS
    assert Settings(CLAWGATE_REDIS_CLUSTER="true", CLAWGATE_INBOX_PARTITIONS="4").partitions == 4
    with pytest.raises(ValueError, match="database 0 only"):
        Settings(REDIS_URL="redis://10.0.0.5:7000/2", CLAWGATE_REDIS_CLUSTER="true")
    with pytest.raises(ValueError, match="over TCP"):
        Settings(REDIS_URL="unix:///tmp/redis.sock", CLAWGATE_REDIS_CLUSTER="true")
    # One partition keeps the inbox key of a single Redis before partitions existed.
    assert Keys("p").inbox_stream() == Keys("p").inbox_stream(0, 16) == "p:{inbox}:stream"


async def test_partitions_spread_over_every_master_one_slot_each(cluster_redis: Redis) -> None:
    redis = cluster_redis
    inbox = Inbox(redis, Keys(PREFIX), partitions=16)
    await inbox.ensure_group()
    ingest = Ingest(inbox, ApprovalStore(redis, Keys(PREFIX)))
    sessions = [f"slack:T1:C1:{n}.0" for n in range(64)]
    for n, session in enumerate(sessions):
        assert await ingest(_inbound(session, n))
        assert not await ingest(_inbound(session, n))  # a platform retry: a duplicate
    spread = await inbox.spread()
    assert sum(spread) == len(sessions) and min(spread) >= 1, spread  # every partition used
    per_master = Counter(_master(redis, stream) for stream in inbox.streams)
    assert len(per_master) == 3 and min(per_master.values()) >= 5, per_master  # 16 = 6+5+5
    for session in sessions:  # the keys one script touches share their partition's slot
        partition = inbox.partition_of(session)
        keys = [
            inbox.streams[partition],
            inbox.lane_key(session),
            inbox.seen_key(session, f"event:{session}"),
            Keys(PREFIX).inbox_starts("1-0", partition, 16),
        ]
        assert {_slot(redis, k) for k in keys} == {_slot(redis, inbox.streams[partition])}
        assert f"{{{inbox_tag(partition, 16)}}}" in keys[1]
    assert await inbox.depth() == (len(sessions), 0)


async def test_a_transaction_runs_on_its_slot_in_one_step(cluster_redis: Redis) -> None:
    """`pipeline(transaction=True)` on the cluster client: atomic on the slot's master (as
    one script), answers as on one server, refuses keys of two slots."""
    redis = cluster_redis
    pipe = redis.pipeline(transaction=True)
    pipe.hset("{s1}:run", mapping={"job": "j1", "start": "3"})
    pipe.rpush("{s1}:history", "a", "b")
    pipe.hmget("{s1}:run", ["start", "done", "job"])
    pipe.lrange("{s1}:history", 0, -1)
    pipe.incr("{s1}:n")
    pipe.pexpire("{s1}:n", 60_000)
    pipe.set("{s1}:flag", "1", px=60_000, nx=True)
    assert await pipe.execute() == [2, 2, ["3", None, "j1"], ["a", "b"], 1, True, True]
    assert await redis.pttl("{s1}:n") > 0
    pipe = redis.pipeline(transaction=True)
    pipe.incr("{s1}:n")
    pipe.incr("{s2}:n")
    with pytest.raises(CrossSlotTransactionError):
        await pipe.execute()


async def test_durability_is_judged_by_the_weakest_master(cluster_redis: Redis) -> None:
    redis = cast(RedisCluster, cluster_redis)
    assert await durability_warnings(cluster_redis) == []  # every master: appendfsync always
    assert await fsync_mode(cluster_redis) == "always"
    one = redis.get_primaries()[1]
    try:
        await redis.config_set("appendfsync", "everysec", target_nodes=one)
        assert await durability_warnings(cluster_redis) == [EVERYSEC]
    finally:
        await redis.config_set("appendfsync", "always", target_nodes=one)


async def test_a_master_restarted_mid_traffic_loses_and_doubles_nothing(
    local_cluster: LocalCluster, cluster_redis: Redis, workdir: Path
) -> None:
    """Two workers (two runtimes, as two processes) on 16 partitions; 12 sessions of 10
    messages sent as a platform does (a 503 is sent again, same ids); the master serving the
    `{inbox}` partition, the workers' marks and a third of the sessions is killed (SIGKILL)
    and started again on its AOF while messages arrive and run. Each message enters its
    session's history once, in order, and its one tool call ran once."""
    redis = cluster_redis
    for n in range(10):
        (workdir / f"f{n}.txt").write_text(f"content {n}\n")
    sessions = [f"slack:T1:C1:{n}.0" for n in range(12)]
    keys = Keys(PREFIX)
    inbox = Inbox(redis, keys, partitions=16)
    ingest = Ingest(inbox, ApprovalStore(redis, keys))
    workers: list[Worker] = []
    for name in ("w1", "w2"):
        runtime, _ = make_runtime(redis, workdir, DemoProvider())

        async def handle(job: Job, runtime: Runtime = runtime) -> None:
            inbound = Inbound.model_validate_json(job.payload)
            await runtime.run(
                inbound.session, inbound.text, inbound.actor, inbound.conversation, job.id
            )

        worker = Worker(inbox, handle, name, liveness_ttl=2.5, reclaim_idle=30)
        await worker.start()
        workers.append(worker)
    refused = 0

    async def send(n: int, session: str) -> None:
        nonlocal refused
        while True:
            try:
                await ingest(_inbound(session, n))
                return
            except IngestUnavailable:  # the platform is answered 503 and sends it again
                refused += 1
                await asyncio.sleep(0.2)

    async def traffic() -> None:
        for n in range(10):
            for session in sessions:
                await send(n, session)
            await asyncio.sleep(0.15)

    restarted = local_cluster.ports.index(int(_master(redis, inbox.streams[0]).split(":")[1]))
    try:
        sending = asyncio.create_task(traffic())
        await asyncio.sleep(0.5)
        started = time.monotonic()
        await asyncio.to_thread(local_cluster.restart, restarted, 1.0)
        down_s = time.monotonic() - started
        await sending
        deadline = time.monotonic() + 60
        while await _unfinished(inbox):
            assert time.monotonic() < deadline, await inbox.depth()
            await asyncio.sleep(0.2)
    finally:
        for worker in workers:
            await worker.stop(1)

    for session in sessions:
        history = [json.loads(m) for m in await redis.lrange(keys.history(session), 0, -1)]
        users = [m["content"] for m in history if m["role"] == "user"]
        assert users == [f"read f{n}.txt" for n in range(10)], (session, users)
        calls = [c for m in history if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        results = [m for m in history if m["role"] == "tool"]
        assert len(calls) == len(results) == 10, (session, history)  # each call ran once
    assert down_s >= 1.0 and refused > 0  # the master really was away while traffic ran
    print(f"master away {down_s:.1f} s, {refused} inputs refused (503) and sent again")


async def _unfinished(inbox: Inbox) -> int:
    try:
        waiting, in_hand = await inbox.depth()
        lengths = [await inbox.redis.xlen(stream) for stream in inbox.streams]
    except Exception:  # the cluster settling: not done
        return 1
    return waiting + in_hand + sum(lengths)
