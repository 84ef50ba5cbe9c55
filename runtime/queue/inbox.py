"""The durable inbox: a Redis Stream read by a consumer group, with dedupe and per-lane order.

Adapters `put` inputs; workers `read` them, process a job only while it is at the head of
its lane (its session), and `ack` it when done. A lane is a Redis list of stream ids written
in the same script as the stream entry, so lane order is arrival order whichever process
reads which entry. Jobs a dead consumer left pending are `reclaim`ed after an idle timeout;
live consumers renew their claims (`renew_claims`) so long jobs are not stolen. Who owns a
job and whether its process lives (liveness marks, fencing, takeover): runtime/ownership/.

The inbox is `partitions` streams (CLAWGATE_INBOX_PARTITIONS), each with its own consumer
group: a lane always lives in the partition its session hashes to, with the partition's
stream, dedupe marks and start counts under one hash tag (runtime/store/keys.py), so every
script here touches one slot of a Redis Cluster and the partitions spread over its masters.
Order within a lane and exactly-once handling are per lane, so partitions change neither.
Every process must use the same number of partitions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from runtime.ownership import liveness_mark
from runtime.ownership.liveness_mark import ALIVE, GONE
from runtime.store.closing import Closing
from runtime.store.connection import is_cluster
from runtime.store.keys import Keys, inbox_partition

GROUP = "workers"
WAITAOF_MS = 1500  # within the ingest deadline: else the platform is answered 503 and retries

# KEYS: stream, lane, dedupe keys... (one partition's)   ARGV: dedupe ttl ms, lane, payload
# A duplicate still marks the keys it lacked: a later delivery through another event type
# (same message, new event id) is recognized too.
PUT = """
local dup = false
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then dup = true end
end
for i = 3, #KEYS do redis.call('SET', KEYS[i], '1', 'PX', ARGV[1], 'NX') end
if dup then return false end
local fields = {'lane', ARGV[2], 'job', ARGV[3]}
-- Only `ack` removes a lane's head and only `put` adds (at the tail): a job that found its lane
-- empty heads it until it is acknowledged, and its worker need not look (Job.first).
if redis.call('LLEN', KEYS[2]) == 0 then fields[5], fields[6] = 'first', '1' end
local id = redis.call('XADD', KEYS[1], '*', unpack(fields))
redis.call('RPUSH', KEYS[2], id)
return id
"""

# KEYS: stream, lane, starts (one partition's)   ARGV: group, id.  Returns the lane's new head,
# saving a round trip.
ACK = """
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('LREM', KEYS[2], 1, ARGV[2])
redis.call('DEL', KEYS[3])
return redis.call('LINDEX', KEYS[2], 0)
"""

# KEYS: stream, lane (one partition's)   ARGV: the job heading the lane, how many to look at
# behind it.  The jobs queued behind it, {id, payload, ...} in lane order; none unless it heads
# the lane (a run that is no lane's head has no one queued behind it).
BEHIND = """
local ids = redis.call('LRANGE', KEYS[2], 0, tonumber(ARGV[2]))
if ids[1] ~= ARGV[1] then return {} end
local found = {}
for i = 2, #ids do
  local entry = redis.call('XRANGE', KEYS[1], ids[i], ids[i])[1]
  if entry then
    local fields = entry[2]
    for f = 1, #fields, 2 do
      if fields[f] == 'job' then
        found[#found + 1] = ids[i]
        found[#found + 1] = fields[f + 1]
      end
    end
  end
end
return found
"""

# KEYS: stream   ARGV: group, consumer, ids...  Resets the idle time of the jobs the consumer
# still owns; returns those it lost, each with why: {id, 'taken' (reclaimed by another worker
# while this one stalled) or 'gone' (finished elsewhere: e.g. joined a running run), ...}.
RENEW_CLAIMS = """
local lost = {}
for i = 3, #ARGV do
  local entry = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)[1]
  if entry and entry[2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    lost[#lost + 1] = ARGV[i]
    lost[#lost + 1] = entry and 'taken' or 'gone'
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

# KEYS: a job's start count   ARGV: ttl ms.  Counts a start and keeps the count a while.
STARTED = """
local starts = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return starts
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
MARK_POLLING = (
    _NOW
    + """
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 3600000)
"""
)
# KEYS: workers zset   ARGV: window ms
POLLING = _NOW + "return redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[1]), '+inf')"
# KEYS: workers zset.  Now, then each worker and when it last polled (the last hour's).
POLLED = _NOW + "return {now, redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}"

# KEYS: stream (one partition's)   ARGV: group.  {now, waiting, in progress, id of the oldest
# entry not yet read or ''}. Acknowledged entries are deleted, so the stream holds exactly the
# waiting and the in-progress ones; the oldest waiting one is the first after the group's
# last delivered id.
DEPTH = (
    _NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {now, 0, 0, ''} end
local last, pending = '0-0', 0
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local fields = {}
  for i = 1, #group, 2 do fields[group[i]] = group[i + 1] end
  if fields['name'] == ARGV[1] then
    last, pending = fields['last-delivered-id'], fields['pending']
  end
end
local waiting = math.max(redis.call('XLEN', KEYS[1]) - pending, 0)
local oldest = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', 1)[1]
return {now, waiting, pending, oldest and oldest[1] or ''}
"""
)


Lost = Literal["taken", "gone"]  # why a worker no longer owns a job it held (Inbox.renew_claims)


@dataclass(frozen=True, slots=True)
class Job:
    id: str  # the stream entry's id: unique in its partition (so in its lane), not across them
    lane: str
    payload: str
    deliveries: int = 1
    attempt: int = 0  # tries in this process (Redis was unreachable on the earlier ones)
    partition: int = 0
    first: bool = False  # its lane was empty when it was queued: it heads it until acknowledged

    @property
    def ref(self) -> tuple[int, str]:
        """Unique across partitions."""
        return self.partition, self.id


@dataclass(frozen=True, slots=True)
class Polled:
    """A worker as the inbox knows it (`Inbox.workers`)."""

    name: str
    polled_ms_ago: int  # since it last said it polls (server time)
    mark: str | None  # its liveness mark: alive, gone (stopped), fenced, or None (lapsed)


@dataclass(frozen=True, slots=True)
class PartitionDepth:
    partition: int
    waiting: int  # not read by any worker yet
    in_progress: int  # read, not acknowledged
    oldest_waiting_ms: int | None  # how long the oldest waiting job has waited; None: none


def _jobs(entries: Sequence[Any], partition: int) -> list[Job]:
    jobs = []
    for entry_id, fields in entries:
        if fields:  # a deleted entry still pending shows up without fields
            first = fields.get("first") == "1"
            jobs.append(
                Job(entry_id, fields["lane"], fields["job"], partition=partition, first=first)
            )
    return jobs


def _fail_unless_nogroup(replies: Sequence[Any]) -> bool:
    """Whether a pipeline's replies hold a lost group (NOGROUP); other errors are raised."""
    lost = False
    for reply in replies:
        if isinstance(reply, Exception):
            if not isinstance(reply, ResponseError) or "NOGROUP" not in str(reply):
                raise reply
            lost = True
    return lost


class NotDurable(Exception):
    """The input was written, but Redis did not confirm it on disk in time."""


class Inbox:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        dedupe_ttl_s: float = 86_400,
        wait_aof: bool = False,
        partitions: int = 1,
    ) -> None:
        """`wait_aof`: `put` returns only once the write is in Redis's append-only file on
        disk (WAITAOF, on the connection that wrote it: a single Redis only; see
        runtime/store/durability.py). `partitions`: how many streams the inbox spreads over."""
        self.redis = redis
        self.keys = keys
        self.dedupe_ttl_ms = int(dedupe_ttl_s * 1000)
        self.partitions = partitions
        self.streams = [keys.inbox_stream(p, partitions) for p in range(partitions)]
        self.wait_aof = wait_aof

    def partition_of(self, lane: str) -> int:
        return inbox_partition(lane, self.partitions)

    def lane_key(self, lane: str) -> str:
        return self.keys.inbox_lane(lane, self.partition_of(lane), self.partitions)

    def seen_key(self, lane: str, dedupe_key: str) -> str:
        """A dedupe mark lives in its input's partition, for the enqueue script: every
        delivery of one input names the same session (or approval), so the same partition."""
        return self.keys.inbox_seen(dedupe_key, self.partition_of(lane), self.partitions)

    def _starts_key(self, job: Job) -> str:
        return self.keys.inbox_starts(job.id, job.partition, self.partitions)

    async def put(self, lane: str, payload: str, dedupe: Sequence[str]) -> str | None:
        """Append a job unless any dedupe key was seen; returns its id, None for a duplicate."""
        stream = self.streams[self.partition_of(lane)]
        seen = [self.seen_key(lane, key) for key in dedupe]
        keys = [stream, self.lane_key(lane), *seen]
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
        for stream in self.streams:  # at start, and when a group was lost: one trip each
            try:
                await self.redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def _regroup(self, exc: ResponseError) -> None:
        """The group is gone (Redis restarted empty, or the stream was deleted) while inputs
        keep arriving: create it again, or the workers would never read anything again."""
        if "NOGROUP" not in str(exc):
            raise exc
        await self.ensure_group()

    def read_groups(self) -> list[list[int]]:
        """The partitions one blocking read may cover together: all of them on one server; on
        a cluster each alone (a command's keys must share a slot), so a worker reads each
        partition in its own loop there."""
        every = list(range(self.partitions))
        return [[p] for p in every] if is_cluster(self.redis) else [every]

    async def read(
        self, consumer: str, count: int, block_ms: int, partitions: Sequence[int] = (0,)
    ) -> list[Job]:
        """New jobs of `partitions` (one of `read_groups`), up to `count` from each."""
        wanted: dict[Any, Any] = {self.streams[p]: ">" for p in partitions}
        try:
            reply: Any = await self.redis.xreadgroup(
                GROUP, consumer, wanted, count=count, block=block_ms
            )
        except ResponseError as exc:
            await self._regroup(exc)
            return []
        streams = reply.items() if isinstance(reply, dict) else (reply or [])  # RESP3 / 2
        partition_of = {stream: p for p, stream in enumerate(self.streams)}
        return [
            job for stream, entries in streams for job in _jobs(entries, partition_of[str(stream)])
        ]

    async def head(self, lane: str) -> str | None:
        head = await self.redis.lindex(self.lane_key(lane), 0)
        return None if head is None else str(head)

    async def behind(self, lane: str, job: str, count: int) -> list[Job]:
        """Up to `count` jobs queued behind `job` in its lane, in order, in one round trip;
        none unless `job` heads the lane."""
        partition = self.partition_of(lane)
        keys = [self.streams[partition], self.lane_key(lane)]
        flat = await self.redis.eval(BEHIND, 2, *keys, job, count)
        return [
            Job(str(entry_id), lane, str(payload), partition=partition)
            for entry_id, payload in zip(flat[::2], flat[1::2], strict=True)
        ]

    async def ack(self, job: Job, closing: Closing | None = None) -> str | None:
        """Finish a job, in one round trip with the writes its `closing` holds (sent first);
        returns the id now heading its lane."""
        keys = [self.streams[job.partition], self.lane_key(job.lane), self._starts_key(job)]
        if closing is None or not closing.writes:
            head = await self.redis.eval(ACK, 3, *keys, GROUP, job.id)
            return None if head is None else str(head)
        pipe = self.redis.pipeline(transaction=False)
        closing.queue(pipe)
        pipe.eval(ACK, 3, *keys, GROUP, job.id)
        *replies, head = await pipe.execute(raise_on_error=False)
        for reply in (*replies, head):  # the job stays pending unless all of it was written
            if isinstance(reply, Exception):
                raise reply
        closing.sent = True
        return None if head is None else str(head)

    async def started(self, job: Job) -> int:
        """Count a start of a job taken over from a stopped worker; returns the count."""
        return int(await self.redis.eval(STARTED, 1, self._starts_key(job), self.dedupe_ttl_ms))

    async def renew_claims(self, consumer: str, jobs: Sequence[Job]) -> dict[tuple[int, str], Lost]:
        """Reset the idle time of jobs this consumer works on or waits to work on; returns
        those (`Job.ref`) it lost meanwhile: `taken` over by another consumer, or `gone`
        (finished elsewhere). One script per partition (its stream's slot), all in one
        round trip."""
        ids: dict[int, list[str]] = {}
        for job in jobs:
            ids.setdefault(job.partition, []).append(job.id)
        if not ids:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for partition, some in ids.items():
            pipe.eval(RENEW_CLAIMS, 1, self.streams[partition], GROUP, consumer, *some)
        replies = await pipe.execute()
        return {
            (partition, str(job_id)): "taken" if why == "taken" else "gone"
            for partition, lost in zip(ids, replies, strict=True)
            for job_id, why in zip((lost or [])[::2], (lost or [])[1::2], strict=True)
        }

    async def reclaim(
        self,
        consumer: str,
        min_idle_ms: int,
        cursor: str = "0-0",
        count: int = 50,
        partition: int = 0,
    ) -> tuple[list[Job], str]:
        """Take over jobs of one partition idle for `min_idle_ms` (their consumer died), with
        delivery counts; and where to continue scanning next time ("0-0" when the scan went
        round)."""
        stream = self.streams[partition]
        try:
            reply: list[Any] = await self.redis.xautoclaim(
                stream, GROUP, consumer, min_idle_ms, start_id=cursor, count=count
            )
        except ResponseError as exc:
            await self._regroup(exc)
            return [], "0-0"
        jobs, cursor = _jobs(reply[1], partition), str(reply[0])
        if not jobs:
            return [], cursor
        pipe = self.redis.pipeline(transaction=False)
        for job in jobs:
            pipe.xpending_range(stream, GROUP, min=job.id, max=job.id, count=1)
        pending = await pipe.execute()
        counted = [
            dataclasses.replace(job, deliveries=int(entry[0]["times_delivered"]) if entry else 1)
            for job, entry in zip(jobs, pending, strict=True)
        ]
        return counted, cursor

    async def mark_polling(self, consumer: str) -> None:
        """Say that `consumer` is polling (server time, so hosts' clocks do not matter)."""
        await self.redis.eval(MARK_POLLING, 1, self.keys.inbox_workers(), consumer)

    async def renew_mark(self, consumer: str, ttl_ms: int) -> bool:
        """Say that `consumer`'s process lives for `ttl_ms` more: once this lapses, its jobs
        are taken over at once (and approved calls it executes are settled). False: too late,
        its mark was fenced (its jobs are being taken over) or it said it stopped."""
        return await liveness_mark.renew(self.redis, self.keys.worker(consumer), ttl_ms)

    async def gone(self, consumer: str) -> None:
        """`consumer` stopped for good: its jobs left may be taken over at once."""
        await liveness_mark.gone(self.redis, self.keys.worker(consumer))

    async def fence(self, consumer: str) -> bool:
        """Before taking over the jobs of `consumer`, whose mark lapsed: make sure it can never
        renew it. False if it renewed it meanwhile (it only stalled): leave its jobs."""
        return await liveness_mark.fence(self.redis, self.keys.worker(consumer))

    async def _consumers(self) -> list[dict[str, Any]]:
        """The group's consumers over every partition, one entry per name: jobs pending
        summed, idle the least (a worker reads every partition)."""
        pipe = self.redis.pipeline(transaction=False)
        for stream in self.streams:
            pipe.xinfo_consumers(stream, GROUP)
        replies = await pipe.execute(raise_on_error=False)
        if _fail_unless_nogroup(replies):
            await self.ensure_group()
            return []
        merged: dict[str, dict[str, Any]] = {}
        for consumers in replies:
            for c in consumers:
                name, pending, idle = str(c["name"]), int(c["pending"]), int(c["idle"])
                seen = merged.setdefault(name, {"name": name, "pending": 0, "idle": idle})
                seen["pending"] += pending
                seen["idle"] = min(seen["idle"], idle)
        return list(merged.values())

    async def dead_consumers(self, me: str) -> list[tuple[str, int, int, bool, int]]:
        """Consumers of the group, other than `me`, without a live mark: (name, jobs pending,
        ms since they last read, whether they said they stopped for good, ms since any worker
        first saw the mark lapsed)."""
        others = [c for c in await self._consumers() if c["name"] != me]
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
        """Move up to `count` jobs per partition of the `dead` consumer to `me`, oldest
        first: one round trip to list them, one to take them (a script per partition)."""
        pipe = self.redis.pipeline(transaction=False)
        for stream in self.streams:
            pipe.xpending_range(stream, GROUP, min="-", max="+", count=count, consumername=dead)
        ids = {
            partition: [str(entry["message_id"]) for entry in entries]
            for partition, entries in enumerate(await pipe.execute())
            if entries
        }
        if not ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for partition, some in ids.items():
            pipe.eval(TAKE, 1, self.streams[partition], GROUP, me, dead, *some)
        jobs = []
        for partition, taken in zip(ids, await pipe.execute(), strict=True):
            for entry_id, flat, deliveries in taken or []:
                fields = dict(zip(flat[::2], flat[1::2], strict=True))
                first = fields.get("first") == "1"
                job = Job(
                    str(entry_id), fields["lane"], fields["job"], int(deliveries), first=first
                )
                jobs.append(dataclasses.replace(job, partition=partition))
        return jobs

    async def forget_consumer(self, name: str) -> None:
        """Drop a dead consumer with nothing pending from the group."""
        pipe = self.redis.pipeline(transaction=False)
        for stream in self.streams:
            pipe.xgroup_delconsumer(stream, GROUP, name)
        await pipe.execute()
        await self.redis.hdel(self.keys.inbox_suspects(), name)

    async def workers_polling(self, within_s: float) -> bool:
        """Whether some worker said it was polling in the last `within_s` seconds."""
        return await self.polling(within_s) > 0

    async def polling(self, within_s: float) -> int:
        """How many workers said they were polling in the last `within_s` seconds."""
        count = await self.redis.eval(POLLING, 1, self.keys.inbox_workers(), int(within_s * 1000))
        return int(count)

    async def workers(self) -> list[Polled]:
        """Every worker that polled in the last hour, with its liveness mark: one that was
        killed or stopped stays listed, its mark lapsed or ended. Two round trips."""
        now, flat = await self.redis.eval(POLLED, 1, self.keys.inbox_workers())
        polled = [
            (str(name), int(float(at))) for name, at in zip(flat[::2], flat[1::2], strict=True)
        ]
        if not polled:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for name, _ in polled:
            pipe.get(self.keys.worker(name))
        marks = await pipe.execute()
        return [
            Polled(name, int(now) - at, None if mark is None else str(mark))
            for (name, at), mark in zip(polled, marks, strict=True)
        ]

    async def partition_depths(self) -> list[PartitionDepth]:
        """Each partition's jobs waiting and in progress, and how long the oldest has waited:
        a script per partition (its stream's slot), all in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for stream in self.streams:
            pipe.eval(DEPTH, 1, stream, GROUP)
        depths = []
        for partition, (now, waiting, in_hand, oldest) in enumerate(await pipe.execute()):
            # A stream id starts with the server time it was added, in ms.
            age = int(now) - int(str(oldest).split("-")[0]) if oldest else None
            depths.append(PartitionDepth(partition, int(waiting), int(in_hand), age))
        return depths

    async def depth(self) -> tuple[int, int]:
        """(jobs not yet read, jobs read but not acknowledged), over every partition."""
        depths = await self.partition_depths()
        return sum(d.waiting for d in depths), sum(d.in_progress for d in depths)

    async def spread(self) -> list[int]:
        """Inputs ever added to each partition (XINFO STREAM entries-added): how ingest
        spread over them."""
        pipe = self.redis.pipeline(transaction=False)
        for stream in self.streams:
            pipe.xinfo_stream(stream)
        replies = await pipe.execute(raise_on_error=False)
        return [0 if isinstance(r, Exception) else int(r.get("entries-added", 0)) for r in replies]
