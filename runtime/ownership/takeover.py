"""Takeover: who may take a lapsed worker's jobs. A worker whose liveness mark lapsed and
stayed lapsed for TAKEOVER_CONFIRM, or who said it stopped, loses its jobs to the first
worker that fences its mark: within seconds, not after the idle reclaim's timeout."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from runtime.metrics import TAKEOVERS
from runtime.outage import OUTAGE
from runtime.ownership import FAILED

if TYPE_CHECKING:  # the queue uses this package: its types only
    from runtime.queue.inbox import Inbox, Job


log = logging.getLogger(__name__)

TAKEOVER_INTERVAL = 0.25  # seconds between looks for workers whose liveness mark lapsed
# A lapsed mark is trusted only after this long: right after Redis restarts (or stalls), live
# workers' marks may have lapsed before they could renew them (every eighth of the TTL).
TAKEOVER_CONFIRM = 0.6
FORGET_AFTER_MS = 60_000  # a dead consumer with nothing pending leaves the group after this


async def take_over_forever(
    inbox: Inbox, me: str, take: Callable[[Job], None], stopping: Callable[[], bool]
) -> None:
    """Take over (`take`) the jobs of workers whose liveness mark lapsed (killed) and stayed
    lapsed for TAKEOVER_CONFIRM, or who said they stopped, until `me` is `stopping`."""
    while not stopping():
        await asyncio.sleep(TAKEOVER_INTERVAL)
        if stopping():
            return
        try:  # also when busy: its lanes may be waiting for the dead worker's jobs
            await take_over_lapsed(inbox, me, take)
        except FAILED as exc:
            if not OUTAGE.failed("inbox takeover", exc):
                log.warning("inbox takeover failed (%s)", exc)


async def take_over_lapsed(inbox: Inbox, me: str, take: Callable[[Job], None]) -> None:
    """One look: fence each lapsed (or stopped) worker that has jobs pending, and take them;
    forget one long dead with none."""
    confirm_ms = TAKEOVER_CONFIRM * 1000
    for name, pending, idle_ms, gone, lapsed_ms in await inbox.dead_consumers(me):
        if not gone and lapsed_ms < confirm_ms:
            continue
        if pending:
            if not await inbox.fence(name):
                continue  # it renewed its mark meanwhile: it only stalled
            jobs = await inbox.take_over(me, name)
            if jobs:
                log.warning("took over %d jobs of stopped worker %s", len(jobs), name)
                TAKEOVERS.labels("stopped" if gone else "lapsed").inc(len(jobs))
            for job in jobs:
                take(job)
        elif idle_ms > FORGET_AFTER_MS:
            await inbox.forget_consumer(name)
