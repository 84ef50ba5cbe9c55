"""Reading Redis streams as followers do: where "now" is, and what came after an id."""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import Redis

Entry = tuple[str, dict[str, str]]


def entries(raw: Any) -> list[Entry]:
    return [(str(i), dict(f)) for i, f in cast(list[tuple[str, dict[str, str]]], raw)]


async def last_id(redis: Redis, key: str) -> str:
    """The id of the newest entry, "0-0" when the stream is empty: where following starts."""
    newest = await redis.xrevrange(key, count=1)
    return str(newest[0][0]) if newest else "0-0"


async def read_after(redis: Redis, key: str, after: str, count: int, block_ms: int) -> list[Entry]:
    """Entries after id `after`, waiting up to `block_ms` for the first (XREAD BLOCK)."""
    reply = await redis.xread({key: after}, count=count, block=block_ms)
    streams = reply.items() if isinstance(reply, dict) else (reply or [])  # RESP3 / 2
    return [e for _, raw in cast(list[tuple[str, Any]], streams) for e in entries(raw)]
