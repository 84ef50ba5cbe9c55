"""The durable inbox on a real Redis: dedupe, consumer-group delivery, lane order, ack,
reclaim of a dead consumer's jobs; and `Worker`s sharing one inbox in one process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from bot.settings import Settings
from runtime.approval.store import ApprovalStore
from runtime.models import Actor, ConversationRef
from runtime.ownership.lease import guard
from runtime.queue.inbound import Inbound
from runtime.queue.inbox import GROUP, Inbox, Job
from runtime.queue.ingest import Ingest
from runtime.queue.worker import MAX_STARTS, Worker
from runtime.store.keys import Keys
from tests.conftest import CLUSTER

pytestmark = pytest.mark.e2e  # real worker loops waiting on reclaim timers: the slow tier

PREFIX = "cginbox"
EIGHT_HOURS_MS = 8 * 3600 * 1000
PARTITIONS = 4  # the workers' tests: lanes spread over partitions (over masters, on a cluster)


@pytest.fixture
async def inbox(redis: aioredis.Redis) -> Inbox:
    """One partition: the primitives' tests read partition 0 and look at its keys."""
    box = Inbox(redis, Keys(PREFIX))
    await box.ensure_group()
    return box


@pytest.fixture
async def partitioned(redis: aioredis.Redis) -> Inbox:
    box = Inbox(redis, Keys(PREFIX), partitions=PARTITIONS)
    await box.ensure_group()
    return box


def takeovers(how: str) -> float:
    return REGISTRY.get_sample_value("clawgate_worker_takeovers_total", {"how": how}) or 0


async def put(inbox: Inbox, lane: str, payload: str, *dedupe: str) -> str:
    job_id = await inbox.put(lane, payload, dedupe or (f"key-{lane}-{payload}",))
    assert job_id is not None
    return job_id


async def pending_ids(redis: aioredis.Redis, inbox: Inbox) -> dict[str, str]:
    """id -> consumer for every job read but not acknowledged."""
    rows = [
        row
        for stream in inbox.streams
        for row in await redis.xpending_range(stream, GROUP, min="-", max="+", count=1000)
    ]
    return {str(row["message_id"]): str(row["consumer"]) for row in rows}


# --- Inbox ---------------------------------------------------------------------------------


async def test_put_dedupes_on_any_shared_key_and_marks_the_missing_ones(
    redis: aioredis.Redis, inbox: Inbox
) -> None:
    keys = Keys(PREFIX)
    first = await inbox.put("lane-a", "one", ["event:1", "message:C1:1.1"])
    assert first is not None
    # Another delivery of the same message under a new event id: one key overlaps.
    assert await inbox.put("lane-a", "one again", ["event:2", "message:C1:1.1"]) is None
    assert await redis.exists(keys.inbox_seen("event:2"))  # marked although refused
    # ...so a third delivery known only by that new key is refused too.
    assert await inbox.put("lane-a", "one more", ["event:2"]) is None
    second = await inbox.put("lane-a", "other", ["event:3", "message:C1:1.2"])
    assert second is not None

    assert await redis.xlen(inbox.streams[0]) == 2
    assert await redis.lrange(keys.inbox_lane("lane-a"), 0, -1) == [first, second]
    for key in ("event:1", "event:2", "event:3", "message:C1:1.1", "message:C1:1.2"):
        assert await redis.pttl(keys.inbox_seen(key)) >= EIGHT_HOURS_MS


async def test_dedupe_window_is_never_shorter_than_eight_hours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAWGATE_DEDUPE_TTL", str(8 * 3600 - 1))
    with pytest.raises(ValueError, match="CLAWGATE_DEDUPE_TTL"):
        Settings()
    monkeypatch.delenv("CLAWGATE_DEDUPE_TTL")
    assert Settings().dedupe_ttl >= 8 * 3600


async def test_two_consumers_get_disjoint_jobs(redis: aioredis.Redis, inbox: Inbox) -> None:
    ids = [await put(inbox, f"lane-{n % 3}", str(n)) for n in range(10)]
    a = await inbox.read("A", count=4, block_ms=100)
    b = await inbox.read("B", count=100, block_ms=100)
    assert len(a) == 4 and len(b) == 6
    assert {j.id for j in a}.isdisjoint({j.id for j in b})
    assert sorted(j.id for j in a + b) == sorted(ids)
    assert {j.payload: j.lane for j in a + b} == {str(n): f"lane-{n % 3}" for n in range(10)}
    assert await inbox.read("A", count=10, block_ms=50) == []
    assert await inbox.read("B", count=10, block_ms=50) == []
    pending = await pending_ids(redis, inbox)
    assert {i for i, c in pending.items() if c == "A"} == {j.id for j in a}
    assert {i for i, c in pending.items() if c == "B"} == {j.id for j in b}
    assert await inbox.depth() == (0, 10)


async def test_lane_heads_follow_put_order(redis: aioredis.Redis, inbox: Inbox) -> None:
    a1 = await put(inbox, "a", "a1")
    b1 = await put(inbox, "b", "b1")
    a2 = await put(inbox, "a", "a2")
    a3 = await put(inbox, "a", "a3")
    b2 = await put(inbox, "b", "b2")
    assert await redis.lrange(Keys(PREFIX).inbox_lane("a"), 0, -1) == [a1, a2, a3]
    assert (await inbox.head("a"), await inbox.head("b")) == (a1, b1)
    assert await inbox.head("empty") is None

    jobs = {j.payload: j for j in await inbox.read("A", count=10, block_ms=100)}
    # Those that found their lane empty head it until acknowledged: no look needed.
    assert {p for p, job in jobs.items() if job.first} == {"a1", "b1"}
    await inbox.ack(jobs["a3"])  # out of order: the head stays
    assert await inbox.head("a") == a1
    await inbox.ack(jobs["a1"])
    assert await inbox.head("a") == a2
    await inbox.ack(jobs["b1"])
    assert await inbox.head("b") == b2
    await inbox.ack(jobs["a2"])
    assert await inbox.head("a") is None


async def test_ack_removes_the_job_from_stream_lane_and_pending(
    redis: aioredis.Redis, inbox: Inbox
) -> None:
    job_id = await put(inbox, "lane", "payload")
    assert await inbox.depth() == (1, 0)
    [job] = await inbox.read("A", count=10, block_ms=100)
    assert job == Job(job_id, "lane", "payload", 1, first=True)  # its lane was empty
    assert await inbox.depth() == (0, 1)
    await inbox.ack(job)
    assert await redis.xlen(inbox.streams[0]) == 0
    assert await redis.llen(Keys(PREFIX).inbox_lane("lane")) == 0
    assert await pending_ids(redis, inbox) == {}
    assert await inbox.depth() == (0, 0)
    # Acknowledged means gone: nobody reclaims it, a second ack is harmless.
    await asyncio.sleep(0.05)
    assert (await inbox.reclaim("B", min_idle_ms=1))[0] == []
    await inbox.ack(job)


async def test_unacked_job_is_reclaimed_only_after_the_idle_time(
    redis: aioredis.Redis, inbox: Inbox
) -> None:
    job_id = await put(inbox, "lane", "work")
    [job] = await inbox.read("A", count=1, block_ms=100)
    assert (await inbox.reclaim("B", min_idle_ms=600))[0] == []  # A may still be working on it
    await asyncio.sleep(0.7)
    [taken] = (await inbox.reclaim("B", min_idle_ms=600))[0]
    assert taken == Job(job_id, "lane", "work", deliveries=2, first=True)
    assert await pending_ids(redis, inbox) == {job_id: "B"}
    assert (await inbox.reclaim("C", min_idle_ms=600))[0] == []  # B owns it now, freshly
    await asyncio.sleep(0.7)
    [again] = (await inbox.reclaim("C", min_idle_ms=600))[0]
    assert again.deliveries == 3
    await inbox.ack(job)
    assert await pending_ids(redis, inbox) == {}


async def test_keep_prevents_reclaim(redis: aioredis.Redis, inbox: Inbox) -> None:
    job_id = await put(inbox, "lane", "long job")
    [job] = await inbox.read("A", count=1, block_ms=100)
    for _ in range(3):
        await asyncio.sleep(0.35)
        await inbox.renew_claims("A", [job])
        assert (await inbox.reclaim("B", min_idle_ms=500))[0] == []
    await inbox.renew_claims("A", [])  # nothing to renew: no call
    assert await pending_ids(redis, inbox) == {job_id: "A"}
    await asyncio.sleep(0.6)  # A stopped keeping it
    [taken] = (await inbox.reclaim("B", min_idle_ms=500))[0]
    assert (taken.id, taken.deliveries) == (job_id, 2)  # renew_claims() is not a delivery


async def test_keep_reports_jobs_another_consumer_took_over(
    redis: aioredis.Redis, inbox: Inbox
) -> None:
    """A stalled worker must not take back (and run again) what another one reclaimed."""
    mine = await put(inbox, "lane-1", "mine")
    lost = await put(inbox, "lane-2", "lost")
    jobs = {job.id: job for job in await inbox.read("A", count=2, block_ms=100)}
    await asyncio.sleep(0.3)
    [taken] = (await inbox.reclaim("B", min_idle_ms=200, count=1))[0]
    assert taken.id == mine
    # B keeps only what it owns
    assert await inbox.renew_claims("B", [jobs[mine], jobs[lost]]) == {(0, lost): "taken"}
    assert await pending_ids(redis, inbox) == {mine: "B", lost: "A"}
    # One finished elsewhere (a message that joined a running run) is gone, not taken.
    await inbox.ack(jobs[lost])
    assert await inbox.renew_claims("B", [jobs[mine], jobs[lost]]) == {(0, lost): "gone"}


async def test_reclaim_counts_deliveries_per_job(redis: aioredis.Redis, inbox: Inbox) -> None:
    ids = [await put(inbox, f"lane-{n}", str(n)) for n in range(3)]
    await inbox.read("A", count=3, block_ms=100)
    await asyncio.sleep(0.25)
    (await inbox.reclaim("B", min_idle_ms=200, count=1))[0]  # the first job: 2 deliveries
    await asyncio.sleep(0.25)
    jobs = (await inbox.reclaim("C", min_idle_ms=200))[0]
    assert [(j.id, j.deliveries) for j in jobs] == [(ids[0], 3), (ids[1], 2), (ids[2], 2)]


async def test_ack_returns_the_next_head_of_the_lane(inbox: Inbox) -> None:
    first = await put(inbox, "lane", "1")
    second = await put(inbox, "lane", "2")
    jobs = await inbox.read("A", count=2, block_ms=100)
    assert await inbox.ack(jobs[0]) == second
    assert await inbox.ack(jobs[1]) is None
    assert first != second


async def test_partitions_keep_each_lane_in_one_and_are_read_by_groups(
    redis: aioredis.Redis, partitioned: Inbox
) -> None:
    """A session's inputs all go to the partition it hashes to, in order; one read covers
    every partition on one server, each alone on a cluster."""
    inbox = partitioned
    lanes = [f"slack:T1:C1:{n}.0" for n in range(12)]
    ids = {lane: [await put(inbox, lane, f"{lane}#{i}") for i in range(2)] for lane in lanes}
    assert len({inbox.partition_of(lane) for lane in lanes}) > 1  # spread over partitions
    groups = inbox.read_groups()
    assert sorted(p for group in groups for p in group) == list(range(PARTITIONS))
    assert len(groups) == (PARTITIONS if CLUSTER else 1)
    jobs = [job for group in groups for job in await inbox.read("A", 100, 100, group)]
    assert sorted(job.id for job in jobs) == sorted(i for some in ids.values() for i in some)
    for job in jobs:
        assert job.partition == inbox.partition_of(job.lane)
        assert await redis.lrange(inbox.lane_key(job.lane), 0, -1) == ids[job.lane]
    for job in jobs:
        await inbox.ack(job)
    assert await inbox.depth() == (0, 0)
    assert sum(await inbox.spread()) == 2 * len(lanes)


async def test_workers_polling_sees_a_worker_that_marked_polling_recently(inbox: Inbox) -> None:
    assert not await inbox.workers_polling(10)  # nobody ever polled
    await inbox.mark_polling("A")
    assert await inbox.workers_polling(10)
    await asyncio.sleep(0.3)
    assert not await inbox.workers_polling(0.2)


async def test_a_started_worker_counts_as_polling(inbox: Inbox) -> None:
    async def nothing(job: Job) -> None:
        return None

    worker = Worker(inbox, nothing, "W1", reclaim_idle=5)
    await worker.start()
    try:
        assert await inbox.workers_polling(5)
    finally:
        await worker.stop(0)


async def test_a_lost_group_is_created_again(redis: aioredis.Redis, inbox: Inbox) -> None:
    """Redis restarted empty (or the stream was deleted): readers recreate the group instead
    of failing forever while new inputs pile up unread."""
    await put(inbox, "lane", "before")
    await redis.flushdb()
    assert (await inbox.reclaim("A", min_idle_ms=0))[0] == []
    assert await inbox.read("A", count=10, block_ms=10) == []
    await redis.delete(inbox.streams[0])
    job_id = await put(inbox, "lane", "after")  # the stream exists again, without the group
    assert await inbox.read("A", count=10, block_ms=10) == []  # recreates it...
    [job] = await inbox.read("A", count=10, block_ms=10)  # ...from the start of the stream
    assert (job.id, job.payload) == (job_id, "after")


# --- Workers -------------------------------------------------------------------------------


class Recorder:
    """A handler that records (worker, lane, payload) when each job starts and ends."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str, str]] = []
        self.done: list[tuple[str, str, str]] = []
        self.deliveries: dict[str, int] = {}
        self.busy: set[str] = set()  # lanes with a job in progress
        self.overlaps: list[str] = []
        self.delays: dict[str, float] = {}
        self.fail: set[str] = set()
        self.block: dict[str, asyncio.Event] = {}

    def handler(self, worker: str) -> Callable[[Job], Awaitable[None]]:
        async def handle(job: Job) -> None:
            if job.lane in self.busy:
                self.overlaps.append(job.payload)
            self.busy.add(job.lane)
            self.started.append((worker, job.lane, job.payload))
            self.deliveries[job.payload] = job.deliveries
            try:
                delay = self.delays.get(job.lane, 0.005)
                for _ in range(3):  # a few awaits, so other jobs can interleave
                    await asyncio.sleep(delay / 3)
                if job.payload in self.block:
                    await self.block[job.payload].wait()
                if job.payload in self.fail:
                    raise RuntimeError(f"handler failed on {job.payload}")
            finally:
                self.busy.discard(job.lane)
            self.done.append((worker, job.lane, job.payload))

        return handle

    def order(self, lane: str) -> list[str]:
        return [payload for _, done_lane, payload in self.done if done_lane == lane]


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the workers")
        await asyncio.sleep(0.01)


@pytest.fixture
async def workers() -> AsyncIterator[list[Worker]]:
    """Workers a test starts; all stopped at the end."""
    started: list[Worker] = []
    yield started
    for worker in started:
        await worker.stop(grace=0)


async def start(
    workers: list[Worker],
    inbox: Inbox,
    recorder: Recorder,
    name: str,
    reclaim_idle: float = 30,
    liveness_ttl: float = 3.0,
) -> Worker:
    worker = Worker(
        inbox, recorder.handler(name), name, reclaim_idle=reclaim_idle, liveness_ttl=liveness_ttl
    )
    await worker.start()
    workers.append(worker)
    return worker


async def test_two_workers_keep_lane_order_and_lanes_run_concurrently(
    partitioned: Inbox, workers: list[Worker]
) -> None:
    inbox = partitioned
    recorder = Recorder()
    recorder.delays = {"slow": 0.3}
    await start(workers, inbox, recorder, "w1")
    await start(workers, inbox, recorder, "w2")
    lanes = ["slow", "fast-1", "fast-2"]
    expected: dict[str, list[str]] = {lane: [] for lane in lanes}
    for n in range(6):
        for lane in lanes:
            payload = f"{lane}#{n}"
            expected[lane].append(payload)
            await put(inbox, lane, payload)
            await asyncio.sleep(0.002)  # arrivals spread out, so both workers read some

    await wait_until(lambda: len(recorder.done) == 18)
    for lane in lanes:
        assert recorder.order(lane) == expected[lane]
    assert recorder.overlaps == []  # never two jobs of one lane at once, across workers
    assert sorted(p for _, _, p in recorder.started) == sorted(
        p for lane in lanes for p in expected[lane]
    )
    # The slow lane (6 x 0.3 s) did not hold the others up: they were done before its 2nd job.
    done = [payload for _, _, payload in recorder.done]
    assert done.index("fast-1#5") < done.index("slow#1")
    assert done.index("fast-2#5") < done.index("slow#1")
    assert {w for w, _, _ in recorder.done} == {"w1", "w2"}
    assert await inbox.depth() == (0, 0)


async def test_a_failing_job_is_acknowledged_not_retried(
    redis: aioredis.Redis, inbox: Inbox, workers: list[Worker]
) -> None:
    recorder = Recorder()
    recorder.fail = {"boom"}
    await start(workers, inbox, recorder, "w1", reclaim_idle=1)
    await start(workers, inbox, recorder, "w2", reclaim_idle=1)
    await put(inbox, "lane", "boom")
    await put(inbox, "lane", "after")
    await wait_until(lambda: len(recorder.done) == 1)
    assert recorder.order("lane") == ["after"]  # the failure did not block the lane
    await asyncio.sleep(1.6)  # longer than the reclaim idle time: nothing comes back
    assert [p for _, _, p in recorder.started] == ["boom", "after"]
    assert await inbox.depth() == (0, 0)
    assert await pending_ids(redis, inbox) == {}
    assert await inbox.head("lane") is None


async def test_stopped_worker_leaves_its_job_pending_for_another(
    redis: aioredis.Redis, inbox: Inbox, workers: list[Worker]
) -> None:
    recorder = Recorder()
    recorder.block = {"stuck": asyncio.Event()}  # never set: the job cannot finish
    first = await start(workers, inbox, recorder, "w1", reclaim_idle=30)
    stuck = await put(inbox, "lane", "stuck")
    after = await put(inbox, "lane", "after")  # same lane: must wait for "stuck"
    await wait_until(lambda: recorder.started == [("w1", "lane", "stuck")])
    await wait_until(lambda: first.in_flight == 2)

    await first.stop(grace=0.2)
    assert recorder.done == []
    assert await pending_ids(redis, inbox) == {stuck: "w1", after: "w1"}
    assert await inbox.head("lane") == stuck

    recorder.block.clear()  # the next worker can finish it
    stopped_at, before = time.monotonic(), takeovers("stopped")
    await start(workers, inbox, recorder, "w2", reclaim_idle=30)
    await wait_until(lambda: len(recorder.done) == 2, timeout=10)
    # At once: a stopped worker clears its liveness mark (the idle fallback would take 1 s).
    assert time.monotonic() - stopped_at < 0.9
    assert recorder.done == [("w2", "lane", "stuck"), ("w2", "lane", "after")]
    assert recorder.deliveries == {"stuck": 2, "after": 2}
    assert takeovers("stopped") == before + 2
    assert await inbox.depth() == (0, 0)


async def test_a_stopping_worker_takes_no_more_jobs_of_dead_workers(
    redis: aioredis.Redis, inbox: Inbox, workers: list[Worker]
) -> None:
    """While it finishes what it holds, a stopping worker leaves others' orphans alone: what
    it took now would only be cut off at the end of the grace time (one more delivery each)."""
    recorder = Recorder()
    release = asyncio.Event()
    recorder.block = {"finishing": release}
    orphan = await put(inbox, "lane-2", "orphan")
    [job] = await inbox.read("dead", count=1, block_ms=100)  # a worker that then died:
    assert job.id == orphan
    await inbox.renew_mark("dead", 1500)  # its liveness mark lapses while w1 is stopping
    first = await start(workers, inbox, recorder, "w1", reclaim_idle=1)
    await put(inbox, "lane-1", "finishing")
    await wait_until(lambda: [p for _, _, p in recorder.started] == ["finishing"])

    stopping = asyncio.create_task(first.stop(grace=10))
    await asyncio.sleep(2.2)  # the orphan can be taken over during the grace time
    release.set()
    await stopping
    assert [p for _, _, p in recorder.started] == ["finishing"]
    assert await pending_ids(redis, inbox) == {orphan: "dead"}

    await start(workers, inbox, recorder, "w2", reclaim_idle=1)
    await wait_until(lambda: recorder.order("lane-2") == ["orphan"])
    assert recorder.deliveries["orphan"] == 2


def kill(worker: Worker) -> None:
    """As kill -9 would: every task of the worker stops where it is, nothing is acknowledged
    or said any more (its liveness mark then lapses on its own)."""
    for task in [*worker._tasks, *worker._lanes.values()]:
        task.cancel()


async def test_jobs_of_a_worker_whose_liveness_lapsed_are_taken_over_at_once(
    redis: aioredis.Redis, inbox: Inbox, workers: list[Worker]
) -> None:
    recorder = Recorder()
    recorder.block = {"stuck": asyncio.Event()}
    first = await start(workers, inbox, recorder, "w1", liveness_ttl=1.0)
    stuck = await put(inbox, "lane", "stuck")
    after = await put(inbox, "lane", "after")
    await wait_until(lambda: recorder.started == [("w1", "lane", "stuck")])
    await start(workers, inbox, recorder, "w2", liveness_ttl=1.0)
    await asyncio.sleep(2.0)  # twice the liveness time: a live worker's jobs stay its own
    assert await pending_ids(redis, inbox) == {stuck: "w1", after: "w1"}

    kill(first)
    killed_at, before = time.monotonic(), takeovers("lapsed")
    recorder.block["stuck"].set()
    await wait_until(lambda: len(recorder.done) == 2, timeout=10)
    # The idle fallback is 30 s: the lapsed mark (1 s, trusted after 1 s more) is what let
    # w2 take them over.
    assert time.monotonic() - killed_at < 3.0
    assert recorder.done == [("w2", "lane", "stuck"), ("w2", "lane", "after")]
    assert takeovers("lapsed") == before + 2
    assert await inbox.depth() == (0, 0)


def stall(worker: Worker) -> asyncio.Task[None]:
    """A process stopped (SIGSTOP, a paused VM): it renews nothing while the test goes on.
    Returns its renewal loop, stopped; `wake` starts it again."""
    (renewal,) = [t for t in worker._tasks if t.get_name() == "liveness-renewal"]
    renewal.cancel()
    return renewal


def wake(worker: Worker, renewal: asyncio.Task[None]) -> None:
    worker._tasks[worker._tasks.index(renewal)] = asyncio.create_task(worker.renewal.forever())


class Effects:
    """A handler whose job ends with an effect (a post, a tool run) behind the lease."""

    def __init__(self, blocked: str) -> None:
        self.release = asyncio.Event()
        self.blocked = blocked
        self.started: list[tuple[str, str]] = []
        self.effects: list[tuple[str, str]] = []

    def handler(self, worker: str) -> Callable[[Job], Awaitable[None]]:
        async def handle(job: Job) -> None:
            self.started.append((worker, job.payload))
            if worker == self.blocked:
                await self.release.wait()
            await guard()
            self.effects.append((worker, job.payload))

        return handle


async def stalled_in_a_job(
    inbox: Inbox, workers: list[Worker], effects: Effects
) -> tuple[Worker, str, asyncio.Task[None]]:
    """Worker w1 (liveness 1 s), stalled in the middle of a job: it, the job, its renewal loop."""
    first = Worker(inbox, effects.handler("w1"), "w1", liveness_ttl=1.0)
    await first.start()
    workers.append(first)
    job = await put(inbox, "lane", "job")
    await wait_until(lambda: effects.started == [("w1", "job")])
    return first, job, stall(first)


async def test_a_job_that_joined_a_running_run_is_let_go_by_the_worker_waiting_for_it(
    inbox: Inbox, workers: list[Worker], caplog: pytest.LogCaptureFixture
) -> None:
    """Steering acknowledges a message that joined the run ahead of it in its lane
    (runtime/queue/steering.py): the worker that held it stops waiting for it, quietly."""
    recorder = Recorder()
    recorder.block = {"running": asyncio.Event()}
    worker = await start(workers, inbox, recorder, "w1", reclaim_idle=1)
    await put(inbox, "lane", "running")
    joined = await put(inbox, "lane", "joined")
    await wait_until(lambda: len(worker._held.get("lane", {})) == 2 and bool(recorder.started))
    await inbox.ack(Job(joined, "lane", "joined"))  # what the running run's steering does
    await wait_until(lambda: len(worker._held["lane"]) == 1)  # at its next claim renewal
    assert "taken over" not in caplog.text and not worker.lease.fenced.is_set()
    recorder.block["running"].set()
    await wait_until(lambda: not worker._lanes)
    assert recorder.order("lane") == ["running"]
    assert await inbox.depth() == (0, 0)


async def test_a_worker_that_stalled_while_its_jobs_were_taken_over_does_nothing_more(
    redis: aioredis.Redis, inbox: Inbox, workers: list[Worker]
) -> None:
    effects = Effects(blocked="w1")
    first, job, renewal = await stalled_in_a_job(inbox, workers, effects)
    second = Worker(inbox, effects.handler("w2"), "w2", liveness_ttl=1.0)
    await second.start()
    workers.append(second)
    await wait_until(lambda: effects.effects == [("w2", "job")])  # taken over, done once
    assert await inbox.depth() == (0, 0)

    effects.release.set()  # w1 wakes up in the middle of the job it no longer holds
    await asyncio.sleep(0.3)
    assert effects.effects == [("w2", "job")]  # it waits for its lease's verdict
    wake(first, renewal)
    await asyncio.wait_for(first.lease.fenced.wait(), 5)
    await wait_until(lambda: not first._lanes)
    assert effects.effects == [("w2", "job")]
    assert await redis.get(Keys(PREFIX).worker("w1")) == "fenced"
    assert not await inbox.renew_mark("w1", 1000)  # never alive again: the process exits
    assert job not in await pending_ids(redis, inbox)


async def test_a_worker_that_stalled_but_kept_its_jobs_goes_on(
    redis: aioredis.Redis, inbox: Inbox, workers: list[Worker]
) -> None:
    effects = Effects(blocked="w1")
    first, _, renewal = await stalled_in_a_job(inbox, workers, effects)
    await asyncio.sleep(1.5)  # its mark lapsed, with nobody there to take over
    assert not first.lease.valid()
    effects.release.set()
    await asyncio.sleep(0.3)
    assert effects.effects == []
    wake(first, renewal)
    await wait_until(lambda: effects.effects == [("w1", "job")])
    assert not first.lease.fenced.is_set()
    await wait_until(lambda: not first._lanes)
    assert await inbox.depth() == (0, 0)


async def test_a_mark_is_fenced_only_while_lapsed_and_never_renewed_after(
    redis: aioredis.Redis, inbox: Inbox
) -> None:
    assert await inbox.renew_mark("w", 300)
    assert not await inbox.fence("w")  # alive: it only looked stalled
    await asyncio.sleep(0.4)
    assert await inbox.renew_mark("w", 300)  # lapsed, not fenced: renewed
    await asyncio.sleep(0.4)
    assert await inbox.fence("w")
    assert not await inbox.renew_mark("w", 300)
    await inbox.gone("g")
    assert await inbox.fence("g")
    assert not await inbox.renew_mark("g", 300)


async def test_a_job_that_keeps_killing_its_workers_is_dropped_and_told(
    redis: aioredis.Redis, inbox: Inbox, workers: list[Worker]
) -> None:
    poison = await put(inbox, "lane", "poison")
    for _ in range(MAX_STARTS):  # five workers took it over and died running it
        await inbox.started(Job(poison, "lane", "poison"))
    await inbox.read("dead", count=1, block_ms=100)  # the last one: it holds it
    recorder = Recorder()
    told: list[str] = []

    async def dropped(job: Job) -> None:
        told.append(job.payload)

    worker = Worker(inbox, recorder.handler("w1"), "w1", dropped=dropped)
    before = REGISTRY.get_sample_value("clawgate_jobs_dropped_total") or 0
    await worker.start()
    workers.append(worker)
    await wait_until(lambda: told == ["poison"])
    assert REGISTRY.get_sample_value("clawgate_jobs_dropped_total") == before + 1
    await asyncio.sleep(0.2)
    assert recorder.started == []
    assert await pending_ids(redis, inbox) == {}
    assert await inbox.head("lane") is None


async def test_a_busy_session_does_not_starve_the_others(
    partitioned: Inbox, workers: list[Worker]
) -> None:
    """Concurrency counts sessions being worked on, not jobs waiting behind one."""
    inbox = partitioned
    recorder = Recorder()
    recorder.delays = {"busy": 0.3}
    for n in range(8):
        await put(inbox, "busy", f"busy-{n}")
    await put(inbox, "quiet", "quiet-0")
    worker = Worker(inbox, recorder.handler("W"), "W", concurrency=2)
    await worker.start()
    workers.append(worker)
    await wait_until(lambda: ("W", "quiet", "quiet-0") in recorder.done, timeout=5)
    assert len(recorder.order("busy")) < 3  # the quiet session did not wait for the busy one
    await wait_until(lambda: len(recorder.order("busy")) == 8, timeout=10)
    assert recorder.order("busy") == [f"busy-{n}" for n in range(8)]


async def test_a_decision_is_queued_in_its_approvals_session(
    redis: aioredis.Redis, inbox: Inbox
) -> None:
    keys = Keys(PREFIX)
    await redis.set(keys.approval_index("abc123"), "slack:T1:C1:9.0")
    ingest = Ingest(inbox, ApprovalStore(redis, keys))

    def decision(approval_id: str) -> Inbound:
        return Inbound(
            platform="slack",
            event_id=f"tr-{approval_id}",
            dedupe_keys=(f"trigger:{approval_id}",),
            session="slack:T1:C1",  # a slash command: Slack does not say which thread
            conversation=ConversationRef(platform="slack", id="slack:T1:C1"),
            actor=Actor(platform="slack", user_id="U1"),
            text=f"/approve {approval_id}",
            approval_id=approval_id,
        )

    assert await ingest(decision("ABC123"))
    assert await ingest(decision("unknown"))  # no such approval: the command's own session
    assert len(await redis.lrange(keys.inbox_lane("slack:T1:C1:9.0"), 0, -1)) == 1
    assert len(await redis.lrange(keys.inbox_lane("slack:T1:C1"), 0, -1)) == 1
