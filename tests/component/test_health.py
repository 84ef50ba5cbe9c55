"""The Health page's facts, read from a real Redis (a cluster under TEST_REDIS_CLUSTER=1):
workers alive, stopped or killed (listed as gone, not dropped), each partition's depth and
lag, the Redis server; and what the serving process adds (bot/health_facts.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.health_facts import DEMO_MODEL, ModelReachability, gather
from bot.settings import Settings
from runtime.health import RedisFact, queue_facts
from runtime.queue.inbox import Inbox, Job
from runtime.queue.worker import Worker
from runtime.store.connection import EMBEDDED_WARNING, connect
from runtime.store.durability import durability_warnings
from runtime.store.keys import Keys
from tests.fake_openai import FakeOpenAI
from tests.processes import CLAWGATE, clean_env
from tests.serving import running

TTL = 0.4  # seconds a worker's liveness mark lasts here


def _inbox(redis: aioredis.Redis, partitions: int = 3) -> Inbox:
    return Inbox(redis, Keys(f"health-{uuid.uuid4().hex[:8]}"), partitions=partitions)


async def _idle(_: Job) -> None:
    return None


async def _worker(inbox: Inbox, name: str) -> Worker:
    worker = Worker(inbox, _idle, name, liveness_ttl=TTL)
    await worker.start()
    return worker


async def test_a_killed_worker_is_listed_gone_within_the_liveness_time(
    redis: aioredis.Redis,
) -> None:
    inbox = _inbox(redis)
    first = await _worker(inbox, "host-a:101:aaaa")
    second = await _worker(inbox, "host-b:202:bbbb")
    # What a process leaves behind when killed: it said it polls, and its mark is not renewed.
    await inbox.mark_polling("host-c:303:cccc")
    await inbox.renew_mark("host-c:303:cccc", int(TTL * 1000))
    try:
        workers = {w.id: w for w in (await queue_facts(inbox)).workers}
        assert {i: (w.state, w.host, w.pid) for i, w in workers.items()} == {
            "host-a:101:aaaa": ("alive", "host-a", 101),
            "host-b:202:bbbb": ("alive", "host-b", 202),
            "host-c:303:cccc": ("alive", "host-c", 303),
        }
        await second.stop(grace=0)
        await asyncio.sleep(TTL + 0.1)  # the killed one's mark lapsed; the others renew theirs
        facts = (await queue_facts(inbox)).workers
    finally:
        await first.stop(grace=0)
    states = {w.id: (w.state, w.alive, w.gone) for w in facts}
    assert states == {
        "host-a:101:aaaa": ("alive", True, False),
        "host-b:202:bbbb": ("stopped", False, True),
        "host-c:303:cccc": ("gone", False, True),
    }
    assert facts[0].id == "host-a:101:aaaa"  # the live ones first
    assert all(0 <= w.polled_ago_s < 3 for w in facts)


async def test_a_worker_that_stopped_polling_but_renews_its_mark_is_not_polling(
    redis: aioredis.Redis,
) -> None:
    inbox = _inbox(redis, partitions=1)
    await inbox.mark_polling("stuck")
    await inbox.renew_mark("stuck", 10_000)
    await asyncio.sleep(0.3)
    [fact] = (await queue_facts(inbox, silence_s=0.2)).workers
    assert (fact.state, fact.alive, fact.gone, fact.host, fact.pid) == (
        "not polling",
        False,
        False,
        None,
        None,
    )


async def test_each_partition_shows_what_waits_what_is_in_progress_and_the_lag(
    redis: aioredis.Redis,
) -> None:
    inbox = _inbox(redis, partitions=3)
    await inbox.ensure_group()
    lanes = [f"s{i}" for i in range(12)]
    for lane in lanes:
        await inbox.put(lane, "{}", [f"k-{lane}"])
    await asyncio.sleep(0.3)
    # One lane's job read by a worker (in progress), the rest still waiting.
    busy = inbox.partition_of(lanes[0])
    [job] = await inbox.read("w", 1, 0, [busy])
    assert job.lane == lanes[0]

    partitions = (await queue_facts(inbox)).partitions

    queued = [sum(inbox.partition_of(lane) == p for lane in lanes) for p in range(3)]
    expected = [(p, n - (p == busy), int(p == busy)) for p, n in enumerate(queued)]
    assert [(f.partition, f.waiting, f.in_progress) for f in partitions] == expected
    for fact in partitions:
        if fact.waiting:
            assert fact.lag_s is not None and 0.3 <= fact.lag_s < 5
        else:
            assert fact.lag_s is None
    assert await inbox.depth() == (len(lanes) - 1, 1)


async def test_an_empty_inbox_has_no_lag(redis: aioredis.Redis) -> None:
    inbox = _inbox(redis, partitions=2)
    partitions = (await queue_facts(inbox)).partitions
    assert [(f.waiting, f.in_progress, f.lag_s) for f in partitions] == [(0, 0, None)] * 2


async def test_redis_facts_name_the_servers_memory_and_durability(redis: aioredis.Redis) -> None:
    facts = (await queue_facts(_inbox(redis))).redis
    version = str((await redis.info("server"))["redis_version"])  # a cluster's: one node's
    assert {n.version for n in facts.nodes} == {version}
    assert len(facts.nodes) == (3 if facts.cluster else 1)
    for node in facts.nodes:
        assert node.role == "master" and node.used_memory_human.endswith(("K", "M", "B"))
        assert node.maxmemory_policy and node.address
    assert facts.warnings == await durability_warnings(redis)


async def test_the_model_is_probed_once_per_cache_time(fake_openai: FakeOpenAI) -> None:
    now = [0.0]
    settings = Settings(**fake_openai.settings(CLAWGATE_MODEL="fake-model"))
    model = ModelReachability(settings, cache_s=30, timeout_s=2, clock=lambda: now[0])
    first = await model()
    assert (first.name, first.reachable, first.checked_ago_s) == ("fake-model", True, 0)
    fake_openai.models = []  # the provider stops serving it: seen only once the cache ages
    now[0] = 10
    cached = await model()
    assert (cached.reachable, cached.checked_ago_s) == (True, 10)
    now[0] = 31
    fresh = await model()
    assert not fresh.reachable and "does not list fake-model" in fresh.detail


async def test_gather_reports_this_process_its_worker_and_the_demo_model(
    redis_url: str, redis: aioredis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings(REDIS_URL=redis_url, CLAWGATE_WORKDIR=str(tmp_path))
    async with running(settings, worker=True) as (service, _):
        started = time.monotonic()
        report = await gather(service, ModelReachability(settings))
        assert time.monotonic() - started < 3
    assert report.ready and report.problems == []
    assert report.process.role == "serve" and report.process.worker_polling
    assert report.process.sandbox == service.sandbox.describe()
    assert (report.model.name, report.model.reachable) == (DEMO_MODEL, True)
    assert report.queue is not None
    [me] = [w for w in report.queue.workers if w.id == report.process.worker_id]
    assert me.alive and me.pid is not None
    assert len(report.queue.partitions) == settings.partitions
    assert report.mcp == []


async def test_the_embedded_store_is_said_to_keep_nothing() -> None:
    embedded = connect(None)
    inbox = Inbox(embedded, Keys("health"), partitions=2)
    try:
        await inbox.ensure_group()
        await inbox.put("s1", "{}", ["k1"])
        await inbox.mark_polling("w")
        await inbox.renew_mark("w", 10_000)
        facts = await queue_facts(inbox)
    finally:
        await embedded.aclose()
    assert facts.redis == RedisFact(cluster=False, nodes=[], warnings=[EMBEDDED_WARNING])
    assert [w.state for w in facts.workers] == ["alive"]
    assert sum(p.waiting for p in facts.partitions) == 1


async def test_a_worker_process_killed_shows_as_gone_within_its_liveness_time(
    redis_url: str, redis: aioredis.Redis, tmp_path: Path
) -> None:
    prefix = f"health-{uuid.uuid4().hex[:8]}"
    env = clean_env(
        REDIS_URL=redis_url,
        CLAWGATE_REDIS_PREFIX=prefix,
        CLAWGATE_WORKDIR=str(tmp_path),
        CLAWGATE_LIVENESS_TTL="1",
    )
    proc = await asyncio.create_subprocess_exec(
        *CLAWGATE, "worker", cwd=tmp_path, env=env, stderr=asyncio.subprocess.DEVNULL
    )
    inbox = Inbox(redis, Keys(prefix), partitions=Settings(REDIS_URL=redis_url).partitions)
    try:
        deadline = time.monotonic() + 30
        while not [w for w in (await queue_facts(inbox)).workers if w.pid == proc.pid]:
            assert time.monotonic() < deadline and proc.returncode is None, "never listed"
            await asyncio.sleep(0.1)
        [before] = (await queue_facts(inbox)).workers
        assert before.alive
    finally:
        proc.kill()
        await proc.wait()
    killed = time.monotonic()
    while (await queue_facts(inbox)).workers[0].alive:
        assert time.monotonic() - killed < 1.5, "still alive after its liveness time"
        await asyncio.sleep(0.05)
    [after] = (await queue_facts(inbox)).workers
    assert (after.id, after.state, after.gone) == (before.id, "gone", True)
