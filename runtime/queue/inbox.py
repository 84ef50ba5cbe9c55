"""The durable inbox: a Redis Stream read by a consumer group, with dedupe and per-lane order.

Adapters `put` inputs; workers `read` them, process a job only while it is at the head of
its lane (its session), and `ack` it when done. A lane is a Redis list of stream ids written
in the same script as the stream entry, so lane order is arrival order whichever process
reads which entry. Jobs a dead consumer left pending are `reclaim`ed after an idle timeout;
live consumers `keep` theirs fresh so long jobs are not stolen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from runtime.store.keys import Keys

GROUP = "workers"

# KEYS: stream, lane, dedupe keys...   ARGV: dedupe ttl ms, lane, payload
# A duplicate still marks the keys it lacked: a later delivery through another event type
# (same message, new event id) is recognized too.
PUT = """
local dup = false
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then dup = true end
end
for i = 3, #KEYS do redis.call('SET', KEYS[i], '1', 'PX', ARGV[1], 'NX') end
if dup then return false end
local id = redis.call('XADD', KEYS[1], '*', 'lane', ARGV[2], 'job', ARGV[3])
redis.call('RPUSH', KEYS[2], id)
return id
"""

# KEYS: stream, lane   ARGV: group, id.  Returns the lane's new head, saving a round trip.
ACK = """
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('LREM', KEYS[2], 1, ARGV[2])
return redis.call('LINDEX', KEYS[2], 0)
"""

# KEYS: stream   ARGV: group, consumer, ids...  Resets the idle time of the jobs the consumer
# still owns; returns those it lost (reclaimed by another worker while this one stalled).
KEEP = """
local lost = {}
for i = 3, #ARGV do
  local entry = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)[1]
  if entry and entry[2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
"""


_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""
# KEYS: workers zset   ARGV: consumer.  Workers silent for an hour are forgotten.
BEAT = (
    _NOW
    + """
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 3600000)
"""
)
# KEYS: workers zset   ARGV: window ms
POLLING = _NOW + "return redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[1]), '+inf')"


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    lane: str
    payload: str
    deliveries: int = 1


def _jobs(entries: Sequence[Any]) -> list[Job]:
    jobs = []
    for entry_id, fields in entries:
        if fields:  # a deleted entry still pending shows up without fields
            jobs.append(Job(entry_id, fields["lane"], fields["job"]))
    return jobs


class Inbox:
    def __init__(self, redis: Redis, keys: Keys, dedupe_ttl_s: float = 86_400) -> None:
        self.redis = redis
        self.keys = keys
        self.dedupe_ttl_ms = int(dedupe_ttl_s * 1000)
        self.stream = keys.inbox_stream()

    async def put(self, lane: str, payload: str, dedupe: Sequence[str]) -> str | None:
        """Append a job unless any dedupe key was seen; returns its id, None for a duplicate."""
        keys = [self.stream, self.keys.inbox_lane(lane), *map(self.keys.inbox_seen, dedupe)]
        result = await self.redis.eval(PUT, len(keys), *keys, self.dedupe_ttl_ms, lane, payload)
        return str(result) if result else None

    async def ensure_group(self) -> None:
        try:
            await self.redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _regroup(self, exc: ResponseError) -> None:
        """The group is gone (Redis restarted empty, or the stream was deleted) while inputs
        keep arriving: create it again, or the workers would never read anything again."""
        if "NOGROUP" not in str(exc):
            raise exc
        await self.ensure_group()

    async def read(self, consumer: str, count: int, block_ms: int) -> list[Job]:
        try:
            reply: Any = await self.redis.xreadgroup(
                GROUP, consumer, {self.stream: ">"}, count=count, block=block_ms
            )
        except ResponseError as exc:
            await self._regroup(exc)
            return []
        return [job for _, entries in reply or [] for job in _jobs(entries)]

    async def head(self, lane: str) -> str | None:
        head = await self.redis.lindex(self.keys.inbox_lane(lane), 0)
        return None if head is None else str(head)

    async def ack(self, job: Job) -> str | None:
        """Finish a job; returns the id now heading its lane."""
        keys = [self.stream, self.keys.inbox_lane(job.lane)]
        head = await self.redis.eval(ACK, 2, *keys, GROUP, job.id)
        return None if head is None else str(head)

    async def keep(self, consumer: str, ids: Sequence[str]) -> list[str]:
        """Reset the idle time of jobs this consumer works on or waits to work on; returns
        the ids another consumer took over meanwhile."""
        if not ids:
            return []
        lost = await self.redis.eval(KEEP, 1, self.stream, GROUP, consumer, *ids)
        return [str(job_id) for job_id in lost or []]

    async def reclaim(
        self, consumer: str, min_idle_ms: int, cursor: str = "0-0", count: int = 50
    ) -> tuple[list[Job], str]:
        """Take over jobs idle for `min_idle_ms` (their consumer died), with delivery counts;
        and where to continue scanning next time ("0-0" when the scan went round)."""
        try:
            reply: list[Any] = await self.redis.xautoclaim(
                self.stream, GROUP, consumer, min_idle_ms, start_id=cursor, count=count
            )
        except ResponseError as exc:
            await self._regroup(exc)
            return [], "0-0"
        jobs, cursor = _jobs(reply[1]), str(reply[0])
        if not jobs:
            return [], cursor
        pipe = self.redis.pipeline(transaction=False)
        for job in jobs:
            pipe.xpending_range(self.stream, GROUP, min=job.id, max=job.id, count=1)
        pending = await pipe.execute()
        counted = [
            Job(job.id, job.lane, job.payload, int(entry[0]["times_delivered"]) if entry else 1)
            for job, entry in zip(jobs, pending, strict=True)
        ]
        return counted, cursor

    async def beat(self, consumer: str) -> None:
        """Say that `consumer` is polling (server time, so hosts' clocks do not matter)."""
        await self.redis.eval(BEAT, 1, self.keys.inbox_workers(), consumer)

    async def workers_polling(self, within_s: float) -> bool:
        """Whether some worker said it was polling in the last `within_s` seconds."""
        count = await self.redis.eval(POLLING, 1, self.keys.inbox_workers(), int(within_s * 1000))
        return int(count) > 0

    async def depth(self) -> tuple[int, int]:
        """(jobs not yet read, jobs read but not acknowledged)."""
        groups = await self.redis.xinfo_groups(self.stream)
        for group in groups:
            if group["name"] == GROUP:
                lag = group.get("lag")
                return int(lag or 0), int(group["pending"])
        return int(await self.redis.xlen(self.stream)), 0
