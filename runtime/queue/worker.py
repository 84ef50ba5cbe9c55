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

from runtime import log_context
from runtime.metrics import JOBS_DROPPED, TAKEOVERS
from runtime.outage import OUTAGE
from runtime.ownership.lease import CURRENT, Lease, LeaseLost
from runtime.ownership.renewal import Renewal
from runtime.ownership.takeover import take_over_forever
from runtime.queue.inbox import Inbox, Job, Lost
from runtime.shutdown import cancel
from runtime.store import closing
from runtime.store.closing import Closing
from runtime.store.connection import CLUSTER_OUTAGES, OUTAGES

log = logging.getLogger(__name__)

Handler = Callable[[Job], Awaitable[None]]
HELD_PER_LANE = 4  # jobs read ahead per busy lane: a busy session never starves the others
# Seconds between "still polling" marks in Redis (for /readyz; not the liveness mark, which
# says whether the process lives: runtime/ownership/).
POLLING_MARK_INTERVAL = 2.0
WORKER_SILENCE = 10.0  # seconds without such a mark after which a worker counts as gone
MAX_STARTS = 5  # a job that keeps killing its workers is dropped, not retried forever
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
        often: runtime/ownership/); another worker takes over its jobs once it lapsed.
        `reclaim_idle`: the fallback for jobs of consumers that never had a mark. `dropped`:
        told of a job given up after MAX_STARTS."""
        self.inbox = inbox
        self.handle = handle
        self.consumer = consumer
        self.concurrency = concurrency
        self.reclaim_idle = reclaim_idle
        self.lane_poll = lane_poll
        self.lease = Lease(liveness_ttl)  # `lease.fenced`: set once its jobs were taken over
        self.renewal = Renewal(inbox, consumer, self.lease, self._still_holds)
        self.dropped = dropped
        self.last_poll = 0.0  # monotonic time of the last successful read: /readyz
        self._held: dict[str, dict[str, Job]] = {}  # lane -> jobs this worker holds
        self._lanes: dict[str, asyncio.Task[None]] = {}
        self._running: set[tuple[int, str]] = set()  # jobs (`Job.ref`) being handled now
        self._space = asyncio.Event()
        self._stop_asked = False
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
    def _stopping(self) -> bool:
        """Asked to stop, or fenced: its jobs were taken over while it stalled."""
        return self._stop_asked or self.lease.fenced.is_set()

    @property
    def _readers(self) -> list[asyncio.Task[None]]:
        return self._tasks[: len(self._read_groups)]  # one per read group, first

    def polling(self, within: float = 10.0) -> bool:
        """Reading recently, or busy with as much work as it may take (which is not stuck)."""
        if self._stopping or not self._tasks or any(t.done() for t in self._readers):
            return False
        return time.monotonic() - self.last_poll < within or self.busy

    async def start(self) -> None:
        await self.inbox.ensure_group()
        await self.renewal.first()
        await self._mark_polling()
        self.last_poll = time.monotonic()
        self._tasks = [
            *(
                asyncio.create_task(self._read_forever(group), name=f"inbox-reader-{group[0]}")
                for group in self._read_groups
            ),
            asyncio.create_task(self._mark_polling_forever(), name="inbox-polling-mark"),
            asyncio.create_task(self.renewal.forever(), name="liveness-renewal"),
            asyncio.create_task(self._renew_claims_forever(), name="inbox-claim-renewal"),
            asyncio.create_task(self._reclaim_forever(), name="inbox-reclaimer"),
            asyncio.create_task(
                take_over_forever(self.inbox, self.consumer, self._take, lambda: self._stopping),
                name="inbox-takeover",
            ),
        ]

    async def _mark_polling(self) -> None:
        try:
            await self.inbox.mark_polling(self.consumer)
        except RETRIED as exc:
            if not OUTAGE.failed("inbox polling mark", exc):
                log.warning("inbox polling mark failed (%s)", exc)

    async def _mark_polling_forever(self) -> None:
        """Tell other processes (a serve without its own worker) this worker polls, also
        while it is too busy to read."""
        while True:
            await asyncio.sleep(POLLING_MARK_INTERVAL)
            if self.polling():
                await self._mark_polling()

    async def _still_holds(self) -> bool:
        """After a stall: whether every job this worker held is still its own."""
        held = [job for jobs in self._held.values() for job in jobs.values()]
        return self._let_go(await self.inbox.renew_claims(self.consumer, held))

    async def stop(self, grace: float = 20.0) -> None:
        """Stop taking jobs, let the ones in hand finish for `grace` seconds; what is left
        stays pending in the group and another worker reclaims it."""
        self._stop_asked = True
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
                if not OUTAGE.failed("inbox read", exc):
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
                    if not OUTAGE.failed("inbox reclaim", exc):
                        log.warning("inbox reclaim failed (%s)", exc)
                    continue
                if self._stopping:  # left pending: a live worker reclaims them in turn
                    return
                if jobs:
                    log.warning("reclaimed %d idle jobs", len(jobs))
                    TAKEOVERS.labels("idle").inc(len(jobs))
                for job in jobs:
                    self._take(job)

    async def _renew_claims_forever(self) -> None:
        """Renew the claims on the jobs this worker holds, so the idle reclaim leaves them;
        let go of those it lost."""
        while True:
            await asyncio.sleep(self.reclaim_idle / 3)
            held = [job for jobs in self._held.values() for job in jobs.values()]
            try:
                lost = await self.inbox.renew_claims(self.consumer, held)
            except RETRIED as exc:
                if not OUTAGE.failed("inbox claim renewal", exc):
                    log.warning("inbox claim renewal failed (%s)", exc)
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
        # Every effect of this lane's jobs checks it (runtime/ownership/lease.py).
        CURRENT.set(self.lease)
        try:
            while held:
                if head is None:  # a job that headed its lane from the start needs no look
                    head = next((job.id for job in held.values() if job.first), None)
                if head not in held:
                    try:
                        head = await self.inbox.head(lane)
                    except RETRIED as exc:
                        if not OUTAGE.failed("a lane's head", exc):
                            log.warning("lane %s: cannot read its head (%s)", lane, exc)
                        await asyncio.sleep(1.0)
                        continue
                if head is None:  # everything we hold was finished elsewhere
                    held.clear()
                elif head in held:
                    job = held[head]
                    self._running.add(job.ref)
                    try:
                        with log_context.bound(job=job.id, worker=self.consumer):
                            await self.lease.hold()
                            last = None
                            if await self._may_start(job):
                                last = await self._handle_until_done(job)
                            head = await self._ack(job, last)
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
        JOBS_DROPPED.inc()
        if self.dropped is not None:
            try:
                await self.dropped(job)
            except Exception:
                log.exception("could not tell of dropped job %s", job.id)
        return False

    async def _handle_until_done(self, job: Job) -> Closing:
        """Handle the job; while Redis is unreachable try it again, in place (its lane waits
        behind it), until Redis is back or the worker stops. Returns the writes the job left
        to its acknowledgement (those of a try that failed are dropped with it)."""
        delay = 1.0
        while True:
            with closing.opened() as last:
                if await self._handle(job):
                    return last
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
            OUTAGE.failed(f"job {job.id}", exc)  # tried again, in place
            return False
        except Exception:
            # Acknowledged anyway: a job that fails the same way every time must not loop.
            log.exception("job %s failed", job.id)
        return True

    async def _ack(self, job: Job, last: Closing | None) -> str | None:
        """Retry until Redis takes it (an unacknowledged finished job would run again);
        returns the lane's next head."""
        delay = 0.1
        while True:
            # A job taken over must stay pending for its new owner (XACK heeds no owner).
            await self.lease.hold()
            try:
                return await self.inbox.ack(job, last)
            except RETRIED as exc:
                if not OUTAGE.failed(f"ack of job {job.id}", exc):
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
            if not OUTAGE.failed("approval sweep", exc):
                log.warning("approval sweep skipped: %s", exc)
        except Exception:
            log.exception("approval sweep failed")
