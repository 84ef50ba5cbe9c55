"""The worker: consumes the inbox, one job at a time per lane (session) and many lanes at
once, acknowledging each job only after it was handled. Shared by `clawgate serve` (in
process) and `clawgate worker` (no HTTP); any number of them share one consumer group per
inbox partition, and each reads every partition."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from redis.exceptions import RedisError

from runtime.lease import CURRENT, Lease, LeaseLost
from runtime.queue.inbox import Inbox, Job, Lost
from runtime.shutdown import cancel
from runtime.store.connection import CLUSTER_OUTAGES, OUTAGES

log = logging.getLogger(__name__)

Handler = Callable[[Job], Awaitable[None]]
HELD_PER_LANE = 4  # jobs read ahead per busy lane: a busy session never starves the others
BEAT_INTERVAL = 2.0  # seconds between "still polling" marks in Redis
WORKER_SILENCE = 10.0  # seconds without such a mark after which a worker counts as gone
MAX_STARTS = 5  # a job that keeps killing its workers is dropped, not retried forever
TAKEOVER_INTERVAL = 0.25  # seconds between looks for workers whose liveness mark lapsed
# A lapsed mark is trusted only after this long: right after Redis restarts (or stalls), live
# workers' marks may have lapsed before they could renew them (every eighth of the TTL).
TAKEOVER_CONFIRM = 0.6
RENEWALS_PER_TTL = 8
FORGET_AFTER_MS = 60_000  # a dead consumer with nothing pending leaves the group after this
RETRY_MAX = 10.0  # seconds between tries of a job while Redis is unreachable
# What a loop of the worker waits out and tries again (a cluster's SlotNotCoveredError is no
# RedisError).
RETRIED: tuple[type[Exception], ...] = (RedisError, *CLUSTER_OUTAGES)


class Worker:
    def __init__(
        self,
        inbox: Inbox,
        handle: Handler,
        consumer: str,
        *,
        concurrency: int = 64,
        reclaim_idle: float = 30.0,
        lane_poll: float = 0.02,
        liveness_ttl: float = 2.5,
        dropped: Handler | None = None,
    ) -> None:
        """`liveness_ttl`: seconds this worker's liveness mark lasts (renewed eight times as
        often); another worker takes over its jobs once it lapsed. `reclaim_idle`: the
        fallback for jobs of consumers that never had a mark. `dropped`: told of a job given
        up after MAX_STARTS."""
        self.inbox = inbox
        self.handle = handle
        self.consumer = consumer
        self.concurrency = concurrency
        self.reclaim_idle = reclaim_idle
        self.lane_poll = lane_poll
        self.liveness_ttl = liveness_ttl
        self.lease = Lease(liveness_ttl)  # `lease.fenced`: set once its jobs were taken over
        self.dropped = dropped
        self.last_poll = 0.0  # monotonic time of the last successful read: /readyz
        self._held: dict[str, dict[str, Job]] = {}  # lane -> jobs this worker holds
        self._lanes: dict[str, asyncio.Task[None]] = {}
        self._running: set[tuple[int, str]] = set()  # jobs (`Job.ref`) being handled now
        self._space = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._read_groups = inbox.read_groups()

    @property
    def in_flight(self) -> int:
        return sum(map(len, self._held.values()))

    @property
    def busy(self) -> bool:
        """As much work in hand as it may take: sessions being worked on (one job at a time
        each) up to `concurrency`, or jobs read ahead up to a bound."""
        held_limit = self.concurrency * HELD_PER_LANE
        return len(self._lanes) >= self.concurrency or self.in_flight >= held_limit

    @property
    def _readers(self) -> list[asyncio.Task[None]]:
        return self._tasks[: len(self._read_groups)]  # one per read group, first

    def alive(self, within: float = 10.0) -> bool:
        """Reading recently, or busy with as much work as it may take (which is not stuck)."""
        if self._stopping or not self._tasks or any(t.done() for t in self._readers):
            return False
        return time.monotonic() - self.last_poll < within or self.busy

    async def start(self) -> None:
        await self.inbox.ensure_group()
        # Marked alive before reading anything: no other worker may take what it reads.
        sent = self.lease.clock()
        await self.inbox.live(self.consumer, int(self.liveness_ttl * 1000))
        self.lease.renewed(sent)
        await self._beat()
        self.last_poll = time.monotonic()
        self._tasks = [
            *(
                asyncio.create_task(self._read_forever(group), name=f"inbox-reader-{group[0]}")
                for group in self._read_groups
            ),
            asyncio.create_task(self._beat_forever(), name="inbox-heartbeat"),
            asyncio.create_task(self._live_forever(), name="inbox-liveness"),
            asyncio.create_task(self._keep_forever(), name="inbox-keepalive"),
            asyncio.create_task(self._reclaim_forever(), name="inbox-reclaimer"),
            asyncio.create_task(self._take_over_forever(), name="inbox-takeover"),
        ]

    async def _beat(self) -> None:
        try:
            await self.inbox.beat(self.consumer)
        except RETRIED as exc:
            log.warning("inbox heartbeat failed (%s)", exc)

    async def _beat_forever(self) -> None:
        """Tell other processes (a serve without its own worker) this worker polls, also
        while it is too busy to read."""
        while True:
            await asyncio.sleep(BEAT_INTERVAL)
            if self.alive():
                await self._beat()

    async def _live_forever(self) -> None:
        """Renew the liveness mark while this process runs (until its work is stopped)."""
        while not self.lease.fenced.is_set():
            await asyncio.sleep(self.liveness_ttl / RENEWALS_PER_TTL)
            try:
                await self._renew()
            except RETRIED as exc:
                log.warning("liveness mark failed (%s)", exc)

    async def _renew(self) -> None:
        """Renew the mark, and with it the lease. After a stall past the mark's life (the
        lease lapsed), renewing is not enough: its jobs may have been taken meanwhile, by a
        worker that fenced the mark (it cannot be renewed then) or, after a long stall, by an
        idle reclaim; either way this worker must not go on with any of them."""
        lapsed = not self.lease.valid()
        sent = self.lease.clock()
        alive = await self.inbox.live(self.consumer, int(self.liveness_ttl * 1000))
        if alive and lapsed:
            held = [job for jobs in self._held.values() for job in jobs.values()]
            alive = self._let_go(await self.inbox.keep(self.consumer, held))
        if alive:
            self.lease.renewed(sent)
            if lapsed:
                log.warning("liveness renewed after a stall; nothing was taken over")
            return
        log.error(
            "this process stalled past its liveness time (CLAWGATE_LIVENESS_TTL) and its jobs "
            "were taken over: it stops them where they stand and exits"
        )
        self._stopping = True  # reads no more jobs
        self.lease.fence()

    async def stop(self, grace: float = 20.0) -> None:
        """Stop taking jobs, let the ones in hand finish for `grace` seconds; what is left
        stays pending in the group and another worker reclaims it."""
        self._stopping = True
        for task in self._readers:
            task.cancel()
        lanes = list(self._lanes.values())
        if lanes:
            _, late = await asyncio.wait(lanes, timeout=grace)
            await cancel(late)
        await cancel(self._tasks)
        if self.lease.fenced.is_set():  # its jobs are someone else's already
            return
        try:  # what is left is taken over now, not once the mark lapses
            await self.inbox.gone(self.consumer)
        except RETRIED as exc:
            log.warning("could not clear the liveness mark (%s)", exc)

    # --- taking jobs -----------------------------------------------------------------------

    async def _read_forever(self, partitions: list[int]) -> None:
        while not self._stopping:
            if self.busy:
                self._space.clear()
                await self._space.wait()
                continue
            # The room is shared by the partitions (a read takes up to `count` from each): all
            # together they overshoot `concurrency` by at most one job each.
            room = -(-(self.concurrency - len(self._lanes)) // self.inbox.partitions)
            try:
                jobs = await self.inbox.read(self.consumer, room, 1000, partitions)
            except RETRIED as exc:
                log.warning("inbox read failed (%s); retrying", exc)
                await asyncio.sleep(1.0)
                continue
            self.last_poll = time.monotonic()
            for job in jobs:
                self._take(job)

    async def _reclaim_forever(self) -> None:
        idle_ms = int(self.reclaim_idle * 1000)
        cursors = ["0-0"] * self.inbox.partitions
        while True:
            await asyncio.sleep(self.reclaim_idle / 2)
            for partition, cursor in enumerate(cursors):
                if self._stopping:  # jobs taken now would be cut off when the grace time ends
                    return
                try:
                    jobs, cursors[partition] = await self.inbox.reclaim(
                        self.consumer, idle_ms, cursor, partition=partition
                    )
                except RETRIED as exc:
                    log.warning("inbox reclaim failed (%s)", exc)
                    continue
                if self._stopping:  # left pending: a live worker reclaims them in turn
                    return
                if jobs:
                    log.warning("reclaimed %d idle jobs", len(jobs))
                for job in jobs:
                    self._take(job)

    async def _take_over_forever(self) -> None:
        """Take over the jobs of workers whose liveness mark lapsed (killed) and stayed
        lapsed for TAKEOVER_CONFIRM, or who said they stopped: within seconds, not after an
        idle timeout."""
        confirm_ms = TAKEOVER_CONFIRM * 1000
        while not self._stopping:
            await asyncio.sleep(TAKEOVER_INTERVAL)
            if self._stopping:
                return
            try:  # also when busy: its lanes may be waiting for the dead worker's jobs
                dead = await self.inbox.dead_consumers(self.consumer)
                for name, pending, idle_ms, gone, lapsed_ms in dead:
                    if not gone and lapsed_ms < confirm_ms:
                        continue
                    if pending:
                        if not await self.inbox.fence(name):
                            continue  # it renewed its mark meanwhile: it only stalled
                        jobs = await self.inbox.take_over(self.consumer, name)
                        if jobs:
                            log.warning("took over %d jobs of stopped worker %s", len(jobs), name)
                        for job in jobs:
                            self._take(job)
                    elif idle_ms > FORGET_AFTER_MS:
                        await self.inbox.forget_consumer(name)
            except RETRIED as exc:
                log.warning("inbox takeover failed (%s)", exc)

    async def _keep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.reclaim_idle / 3)
            held = [job for jobs in self._held.values() for job in jobs.values()]
            try:
                lost = await self.inbox.keep(self.consumer, held)
            except RETRIED as exc:
                log.warning("inbox keepalive failed (%s)", exc)
                continue
            self._let_go(lost)

    def _let_go(self, lost: Mapping[tuple[int, str], Lost]) -> bool:
        """Stop holding the waiting jobs this worker lost: taken over while this process
        stalled (the new owner runs them), or finished elsewhere (a message that joined a
        running run: runtime/queue/steering.py). False when one was taken, or one it runs
        was lost: this worker's work is no longer its own."""
        for ref, why in lost.items():
            for jobs in self._held.values():
                job = jobs.get(ref[1])
                if job is None or job.ref != ref or ref in self._running:
                    continue
                if why == "taken":
                    log.warning("job %s was taken over by another worker", job.id)
                del jobs[job.id]
        return all(why == "gone" and ref not in self._running for ref, why in lost.items())

    def _take(self, job: Job) -> None:
        self._held.setdefault(job.lane, {})[job.id] = job
        if job.lane not in self._lanes:
            self._lanes[job.lane] = asyncio.create_task(self._run_lane(job.lane))

    # --- one lane --------------------------------------------------------------------------

    async def _run_lane(self, lane: str) -> None:
        """Handle this worker's jobs of one lane, each only when it heads the lane: an earlier
        job held by another worker is waited for."""
        held = self._held[lane]
        head: str | None = None
        CURRENT.set(self.lease)  # every effect of this lane's jobs checks it (runtime/lease.py)
        try:
            while held:
                if head not in held:
                    try:
                        head = await self.inbox.head(lane)
                    except RETRIED as exc:
                        log.warning("lane %s: cannot read its head (%s)", lane, exc)
                        await asyncio.sleep(1.0)
                        continue
                if head is None:  # everything we hold was finished elsewhere
                    held.clear()
                elif head in held:
                    job = held[head]
                    self._running.add(job.ref)
                    try:
                        await self.lease.hold()
                        if await self._may_start(job):
                            await self._handle_until_done(job)
                        head = await self._ack(job)
                    except LeaseLost:
                        log.warning("job %s: left to the worker that took it over", job.id)
                        return
                    finally:
                        self._running.discard(job.ref)
                        held.pop(job.id, None)
                        self._space.set()
                else:
                    await asyncio.sleep(self.lane_poll)
                    head = None
        finally:
            del self._held[lane]
            del self._lanes[lane]
            self._space.set()

    async def _may_start(self, job: Job) -> bool:
        """A job taken over from a stopped worker counts its starts: one that keeps killing
        the workers that run it is dropped (and its conversation told), not tried forever.
        Takeovers of jobs that were only waiting in a lane do not count."""
        if job.deliveries == 1:
            return True
        starts = await self.inbox.started(job)
        if starts <= MAX_STARTS:
            return True
        log.error("dropping job %s: started %d times, its worker stopped each time", job.id, starts)
        if self.dropped is not None:
            try:
                await self.dropped(job)
            except Exception:
                log.exception("could not tell of dropped job %s", job.id)
        return False

    async def _handle_until_done(self, job: Job) -> None:
        """Handle the job; while Redis is unreachable try it again, in place (its lane waits
        behind it), until Redis is back or the worker stops."""
        delay = 1.0
        while not await self._handle(job):
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)
            job = dataclasses.replace(job, attempt=job.attempt + 1)
            await self.lease.hold()  # still this worker's job once Redis is back?

    async def _handle(self, job: Job) -> bool:
        """False when Redis was unreachable: the job is worth another try."""
        log.info("job %s (delivery %d) of lane %s", job.id, job.deliveries, job.lane)
        try:
            await self.handle(job)
        except asyncio.CancelledError:
            raise
        except OUTAGES as exc:
            log.warning("job %s: Redis unreachable (%s); trying it again", job.id, exc)
            return False
        except Exception:
            # Acknowledged anyway: a job that fails the same way every time must not loop.
            log.exception("job %s failed", job.id)
        return True

    async def _ack(self, job: Job) -> str | None:
        """Retry until Redis takes it (an unacknowledged finished job would run again);
        returns the lane's next head."""
        delay = 0.1
        while True:
            # A job taken over must stay pending for its new owner (XACK heeds no owner).
            await self.lease.hold()
            try:
                return await self.inbox.ack(job)
            except RETRIED as exc:
                log.warning("ack of job %s failed (%s); retrying", job.id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


async def sweep_forever(sweep: Callable[[], Awaitable[int]], interval: float) -> None:
    """Expire overdue approvals and settle crashed executions (every worker may do this)."""
    while True:
        await asyncio.sleep(interval)
        try:
            await sweep()
        except RETRIED as exc:
            log.warning("approval sweep skipped: %s", exc)
        except Exception:
            log.exception("approval sweep failed")
