"""The inbox's gauges a /metrics scrape reads from Redis (runtime/queue/gauges.py): what the
backlog and no-worker alerts of deploy/prometheus/clawgate-alerts.yml fire on."""

from __future__ import annotations

import asyncio
import uuid

import redis.asyncio as aioredis
from prometheus_client import REGISTRY
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from runtime.queue.gauges import sample_inbox
from runtime.queue.inbox import Inbox
from runtime.store.keys import Keys
from tests.conftest import free_port


def gauge(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_a_scrape_reads_the_backlog_its_age_and_the_polling_workers(
    redis: aioredis.Redis,
) -> None:
    inbox = Inbox(redis, Keys(f"gauges-{uuid.uuid4().hex[:8]}"))
    await inbox.ensure_group()
    await sample_inbox(inbox)
    assert gauge("clawgate_queue_oldest_waiting_seconds") == 0
    assert gauge("clawgate_workers_polling") == 0  # the no-worker alert's condition
    for lane in ("a", "b", "c"):
        await inbox.put(lane, "{}", (f"key-{lane}",))
    (taken,) = await inbox.read("w1", count=1, block_ms=100)
    await inbox.mark_polling("w1")
    await asyncio.sleep(0.05)

    await sample_inbox(inbox)

    assert gauge("clawgate_redis_up") == 1
    assert taken.lane == "a"
    assert gauge("clawgate_queue_depth", state="in_progress") == 1
    assert gauge("clawgate_queue_depth", state="waiting") == 2
    oldest = gauge("clawgate_queue_oldest_waiting_seconds")
    assert oldest is not None and 0.05 <= oldest < 5
    assert gauge("clawgate_workers_polling") == 1


async def test_a_scrape_without_redis_says_so_and_keeps_the_last_values(
    redis: aioredis.Redis,
) -> None:
    inbox = Inbox(redis, Keys(f"gauges-{uuid.uuid4().hex[:8]}"))
    await inbox.ensure_group()
    await inbox.put("a", "{}", ("key-a",))
    await sample_inbox(inbox)
    assert gauge("clawgate_queue_depth", state="waiting") == 1
    gone = aioredis.Redis(port=free_port(), retry=Retry(NoBackoff(), 0))  # refused at once
    try:
        await sample_inbox(Inbox(gone, Keys("gauges-gone")))
    finally:
        await gone.aclose()
    assert gauge("clawgate_redis_up") == 0
    assert gauge("clawgate_queue_depth", state="waiting") == 1
