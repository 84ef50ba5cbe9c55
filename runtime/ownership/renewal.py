"""Renewing a worker's liveness mark, and with it its lease: every eighth of the mark's life
while the process runs, until the mark is found fenced (its jobs were taken over)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from runtime.outage import OUTAGE
from runtime.ownership import FAILED
from runtime.ownership.lease import Lease

if TYPE_CHECKING:  # the queue uses this package: its types only
    from runtime.queue.inbox import Inbox


log = logging.getLogger(__name__)

RENEWALS_PER_TTL = 8

# After a stall: whether the worker still holds every job it held (it lets go of those it lost).
StillHolds = Callable[[], Awaitable[bool]]


class Renewal:
    def __init__(self, inbox: Inbox, consumer: str, lease: Lease, still_holds: StillHolds) -> None:
        self.inbox = inbox
        self.consumer = consumer
        self.lease = lease
        self.still_holds = still_holds

    @property
    def _ttl_ms(self) -> int:
        return int(self.lease.ttl * 1000)

    async def first(self) -> None:
        """Mark the process alive before it reads anything: no other worker may take what it
        reads."""
        sent = self.lease.clock()
        await self.inbox.renew_mark(self.consumer, self._ttl_ms)
        self.lease.renewed(sent)

    async def forever(self) -> None:
        """Renew the mark while this process runs (until its work is stopped)."""
        failing = False  # the last renewal failed: a lapse then is Redis's, not a stall
        while not self.lease.fenced.is_set():
            await asyncio.sleep(self.lease.ttl / RENEWALS_PER_TTL)
            try:
                await self.renew(stalled=not failing)
            except FAILED as exc:
                failing = True
                if not OUTAGE.failed("liveness mark", exc):
                    log.warning("liveness mark failed (%s)", exc)
            else:
                failing = False

    async def renew(self, stalled: bool = True) -> None:
        """Renew the mark, and with it the lease. After a stall past the mark's life (the
        lease lapsed), renewing is not enough: its jobs may have been taken meanwhile, by a
        worker that fenced the mark (it cannot be renewed then) or, after a long stall, by an
        idle reclaim; either way this worker must not go on with any of them: the lease is
        fenced (the worker reads no more jobs). `stalled`: whether a lapse is the process's
        stall (said when it turns out harmless) rather than Redis's outage (said already)."""
        lapsed = not self.lease.valid()
        sent = self.lease.clock()
        alive = await self.inbox.renew_mark(self.consumer, self._ttl_ms)
        if alive and lapsed:
            alive = await self.still_holds()
        if alive:
            self.lease.renewed(sent)
            if lapsed and stalled:
                log.warning("liveness renewed after a stall; nothing was taken over")
            return
        log.error(
            "this process stalled past its liveness time (CLAWGATE_LIVENESS_TTL) and its jobs "
            "were taken over: it stops them where they stand and exits"
        )
        self.lease.fence()
