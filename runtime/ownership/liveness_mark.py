"""A process's liveness mark (`keys.worker(name)`): "alive" while it renews it, "gone" once
it said it stopped, "fenced" once another worker decided to take over its jobs.

Renewing and fencing are scripts, so they exclude each other: a mark that lapsed while its
process stalled is either renewed by that process first (then nobody takes over) or fenced
by a taker first (then that process can never renew it, finds out, and stops). A plain SET
would let a process that woke up too late revive its mark after its jobs were taken. The
whole story: runtime/ownership/__init__.py."""

from __future__ import annotations

from redis.asyncio import Redis

ALIVE, GONE = "alive", "gone"  # and "fenced", which only FENCE writes
ENDED_KEPT_MS = 3_600_000  # how long "gone" and "fenced" marks are kept

# KEYS: mark   ARGV: ttl ms.  1 if renewed (it was alive or had lapsed), 0 if gone or fenced.
RENEW = """
local mark = redis.call('GET', KEYS[1])
if mark and mark ~= 'alive' then return 0 end
redis.call('SET', KEYS[1], 'alive', 'PX', ARGV[1])
return 1
"""

# KEYS: mark   ARGV: kept ms.  1 if its jobs may be taken (lapsed, now fenced; or gone), 0 if
# it is alive (renewed meanwhile).
FENCE = """
local mark = redis.call('GET', KEYS[1])
if mark == 'alive' then return 0 end
if mark ~= 'gone' then redis.call('SET', KEYS[1], 'fenced', 'PX', ARGV[1]) end
return 1
"""


async def renew(redis: Redis, mark: str, ttl_ms: int) -> bool:
    return bool(await redis.eval(RENEW, 1, mark, ttl_ms))


async def fence(redis: Redis, mark: str) -> bool:
    return bool(await redis.eval(FENCE, 1, mark, ENDED_KEPT_MS))


async def alive(redis: Redis, mark: str) -> bool:
    return await redis.get(mark) == ALIVE


async def gone(redis: Redis, mark: str) -> None:
    await redis.set(mark, GONE, px=ENDED_KEPT_MS)
