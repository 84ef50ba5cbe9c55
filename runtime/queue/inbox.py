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
ALIVE, GONE = "alive", "gone"  # a process's liveness mark; "gone": it stopped for good
GONE_KEPT_MS = 3_600_000
WAITAOF_MS = 1500  # within the ingest deadline: else the platform is answered 503 and retries

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

# KEYS: stream, lane, starts   ARGV: group, id.  Returns the lane's new head, saving a round trip.
ACK = """
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('LREM', KEYS[2], 1, ARGV[2])
redis.call('DEL', KEYS[3])
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

# KEYS: stream   ARGV: group, new owner, dead consumer, ids...  Moves the dead consumer's entries
# to the new owner unless another worker took them first; answers {id, fields, deliveries}
# for each entry taken.
TAKE = """
local taken = {}
for i = 4, #ARGV do
  local entry = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)[1]
  if entry and entry[2] == ARGV[3] then
    local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i])[1]
    if claimed then taken[#taken + 1] = {claimed[1], claimed[2], entry[4] + 1} end
  end
end
return taken
"""

# KEYS: suspects hash   ARGV: how many lapsed names, lapsed names..., live names...
# When each lapsed consumer was first seen lapsed (server time, shared by every worker so a
# restarted worker does not start over); live ones are cleared. Answers now, then the times.
SUSPECT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lapsed = tonumber(ARGV[1])
local seen = {tostring(now)}
for i = 2, lapsed + 1 do
  redis.call('HSETNX', KEYS[1], ARGV[i], now)
  seen[#seen + 1] = redis.call('HGET', KEYS[1], ARGV[i])
end
for i = lapsed + 2, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
return seen
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
    attempt: int = 0  # tries in this process (Redis was unreachable on the earlier ones)


def _jobs(entries: Sequence[Any]) -> list[Job]:
    jobs = []
    for entry_id, fields in entries:
        if fields:  # a deleted entry still pending shows up without fields
            jobs.append(Job(entry_id, fields["lane"], fields["job"]))
    return jobs


class NotDurable(Exception):
    """The input was written, but Redis did not confirm it on disk in time."""


class Inbox:
    def __init__(
        self, redis: Redis, keys: Keys, dedupe_ttl_s: float = 86_400, wait_aof: bool = False
    ) -> None:
        """`wait_aof`: `put` returns only once the write is in Redis's append-only file on
        disk (WAITAOF; see runtime/store/durability.py)."""
        self.redis = redis
        self.keys = keys
        self.dedupe_ttl_ms = int(dedupe_ttl_s * 1000)
        self.stream = keys.inbox_stream()
        self.wait_aof = wait_aof

    async def put(self, lane: str, payload: str, dedupe: Sequence[str]) -> str | None:
        """Append a job unless any dedupe key was seen; returns its id, None for a duplicate."""
        keys = [self.stream, self.keys.inbox_lane(lane), *map(self.keys.inbox_seen, dedupe)]
        if not self.wait_aof:
            result = await self.redis.eval(PUT, len(keys), *keys, self.dedupe_ttl_ms, lane, payload)
            return str(result) if result else None
        pipe = self.redis.pipeline(transaction=False)  # one connection: WAITAOF covers the put
        pipe.eval(PUT, len(keys), *keys, self.dedupe_ttl_ms, lane, payload)
        pipe.execute_command("WAITAOF", 1, 0, WAITAOF_MS)
        result, (local, _) = await pipe.execute()
        if int(local) < 1:
            raise NotDurable("Redis did not confirm the input on disk in time")
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
        keys = [self.stream, self.keys.inbox_lane(job.lane), self.keys.inbox_starts(job.id)]
        head = await self.redis.eval(ACK, 3, *keys, GROUP, job.id)
        return None if head is None else str(head)

    async def started(self, job_id: str) -> int:
        """Count a start of a job taken over from a stopped worker; returns the count."""
        key = self.keys.inbox_starts(job_id)
        pipe = self.redis.pipeline(transaction=True)
        pipe.incr(key)
        pipe.pexpire(key, self.dedupe_ttl_ms)
        count, _ = await pipe.execute()
        return int(count)

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

    async def live(self, consumer: str, ttl_ms: int) -> None:
        """Say that `consumer`'s process lives for `ttl_ms` more: once this lapses, its jobs
        are taken over at once (and approved calls it executes are settled)."""
        await self.redis.set(self.keys.worker(consumer), ALIVE, px=ttl_ms)

    async def gone(self, consumer: str) -> None:
        """`consumer` stopped for good: its jobs left may be taken over at once."""
        await self.redis.set(self.keys.worker(consumer), GONE, px=GONE_KEPT_MS)

    async def dead_consumers(self, me: str) -> list[tuple[str, int, int, bool, int]]:
        """Consumers of the group, other than `me`, without a live mark: (name, jobs pending,
        ms since they last read, whether they said they stopped for good, ms since any worker
        first saw the mark lapsed)."""
        try:
            consumers = await self.redis.xinfo_consumers(self.stream, GROUP)
        except ResponseError as exc:
            await self._regroup(exc)
            return []
        others = [c for c in consumers if c["name"] != me]
        if not others:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for consumer in others:
            pipe.get(self.keys.worker(str(consumer["name"])))
        marks = await pipe.execute()
        lapsed = [(c, mark) for c, mark in zip(others, marks, strict=True) if mark != ALIVE]
        live = [str(c["name"]) for c, mark in zip(others, marks, strict=True) if mark == ALIVE]
        names = [str(c["name"]) for c, _ in lapsed]
        seen = await self.redis.eval(
            SUSPECT, 1, self.keys.inbox_suspects(), len(names), *names, *live
        )
        now = int(seen[0])
        return [
            (str(c["name"]), int(c["pending"]), int(c["idle"]), mark == GONE, now - int(first))
            for (c, mark), first in zip(lapsed, seen[1:], strict=True)
        ]

    async def take_over(self, me: str, dead: str, count: int = 100) -> list[Job]:
        """Move up to `count` jobs of the `dead` consumer to `me`, oldest first."""
        entries = await self.redis.xpending_range(
            self.stream, GROUP, min="-", max="+", count=count, consumername=dead
        )
        ids = [str(entry["message_id"]) for entry in entries]
        if not ids:
            return []
        taken = await self.redis.eval(TAKE, 1, self.stream, GROUP, me, dead, *ids)
        jobs = []
        for entry_id, flat, deliveries in taken or []:
            fields = dict(zip(flat[::2], flat[1::2], strict=True))
            jobs.append(Job(str(entry_id), fields["lane"], fields["job"], int(deliveries)))
        return jobs

    async def forget_consumer(self, name: str) -> None:
        """Drop a dead consumer with nothing pending from the group."""
        await self.redis.xgroup_delconsumer(self.stream, GROUP, name)
        await self.redis.hdel(self.keys.inbox_suspects(), name)

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
