"""The inbox's gauges, read from Redis when /metrics is scraped: what waits, for how long,
and how many workers poll. Every process reads the same Redis, so each reports the same
values; a scrape that cannot read them says so (`clawgate_redis_up` 0) and leaves the last."""

from __future__ import annotations

from runtime.metrics import QUEUE_DEPTH, QUEUE_OLDEST, REDIS_UP, WORKERS_POLLING
from runtime.queue.inbox import Inbox
from runtime.queue.worker import WORKER_SILENCE
from runtime.store.connection import REDIS_DOWN


async def sample_inbox(inbox: Inbox) -> None:
    try:
        depths = await inbox.partition_depths()
        polling = await inbox.polling(WORKER_SILENCE)
    except REDIS_DOWN:
        REDIS_UP.set(0)
        return
    REDIS_UP.set(1)
    QUEUE_DEPTH.labels("waiting").set(sum(d.waiting for d in depths))
    QUEUE_DEPTH.labels("in_progress").set(sum(d.in_progress for d in depths))
    QUEUE_OLDEST.set(max(0, *(d.oldest_waiting_ms or 0 for d in depths)) / 1000)
    WORKERS_POLLING.set(polling)
