"""A worker's lease on the jobs it holds: what keeps a stalled process from acting on jobs
another worker has taken over.

Other workers take over a worker's jobs once its liveness mark in Redis lapsed (renewed
every eighth of `CLAWGATE_LIVENESS_TTL`: renewal.py) and stayed lapsed for a moment, and
only after fencing the mark (liveness_mark.py, takeover.py), which it can then never renew.
A process stalled past the TTL (a paused VM or container, SIGSTOP, a stuck event loop)
cannot know on waking whether that happened: it must not post, run a tool or write history
until it has renewed its mark (nobody took over: it goes on) or found it fenced (its jobs
are someone else's: it stops them where they stand, and the process exits so its supervisor
starts it afresh). Renewal comes within a moment of waking; an effect waits that long for
it, no more: a lease that stays lapsed means Redis is unreachable, and the job takes the
outage path (the chat is told, the job is tried again once Redis is back, if it is still
this worker's).

The lease is valid until `ttl` after the last renewal was *sent* (Redis set the mark's
expiry no earlier), by this host's monotonic clock, which runs on while the process is
stopped. Effects check it with `guard()`, through a context variable the worker sets for the
jobs it runs; code outside a worker's job (the terminal chat, the operator CLI) has no lease.
"""

from __future__ import annotations

import asyncio
import time
from contextvars import ContextVar

from redis.exceptions import ConnectionError as RedisConnectionError

# How often an effect that found the lease lapsed looks again for the renewal's verdict.
RECHECK = 0.05
# How long an effect waits for that verdict, in liveness times (renewals come 8 times as often).
PATIENCE = 0.25


class LeaseLost(BaseException):
    """This worker's jobs were taken over while it stalled: the job at hand stops where it
    stands, with no further effect. A BaseException, so that no `except Exception` (a tool's
    failure, a channel's error handling) turns it into an answer posted or a call run."""


class LeaseLapsed(RedisConnectionError):
    """The lease lapsed and could not be renewed for now (Redis unreachable): an outage, so
    the job is tried again once the lease is renewed, or dropped if it was fenced."""


class Lease:
    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._until = float("-inf")  # no renewal yet: nothing may act
        self.fenced = asyncio.Event()

    @staticmethod
    def clock() -> float:
        return time.monotonic()

    def valid(self) -> bool:
        return not self.fenced.is_set() and self.clock() < self._until

    def renewed(self, sent_at: float) -> None:
        """Redis renewed the mark by a command sent at `sent_at` (this lease's clock)."""
        if not self.fenced.is_set():
            self._until = max(self._until, sent_at + self.ttl)

    def fence(self) -> None:
        self.fenced.set()

    async def hold(self, patience: float | None = None) -> None:
        """Return at once while the lease is valid; after a stall, once it is renewed. Raise
        LeaseLost if the mark was fenced meanwhile, LeaseLapsed if neither came within
        `patience` seconds (None: wait for the verdict however long)."""
        deadline = None if patience is None else self.clock() + patience
        while not self.valid():
            if self.fenced.is_set():
                raise LeaseLost("this worker's jobs were taken over while it stalled")
            if deadline is not None and self.clock() > deadline:
                raise LeaseLapsed("this worker's liveness mark could not be renewed")
            await asyncio.sleep(RECHECK)


CURRENT: ContextVar[Lease | None] = ContextVar("clawgate_lease", default=None)


async def guard() -> None:
    """Before an effect (a post, a tool run, a history write): proceed only while the worker
    running this job still holds it."""
    lease = CURRENT.get()
    if lease is not None:
        await lease.hold(lease.ttl * PATIENCE)
