"""What the agent changed without approval since the last approval decided in a session: the
files its file tools wrote unasked (a `write` of the Makefile, an `edit` of conftest.py), so
that the approver of a later `make` or `pytest` sees what that command will run.

One bounded Redis list per session (the newest paths, each once), with a mark when older
ones were dropped; the notice of the next approval shows it, and a decision resets it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from runtime.store.keys import Keys

MAX_PATHS = 20  # kept per session: the notice names the newest ones
TTL_MS = 7 * 86_400_000  # an idle session's record goes with time
WRITING_TOOLS = frozenset({"write", "edit"})  # built-in tools that change a file at `path`

# KEYS: the list, the "more" mark   ARGV: path, max paths, ttl ms
_ADD = """
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[1])
if redis.call('LLEN', KEYS[1]) > tonumber(ARGV[2]) then
  redis.call('LPOP', KEYS[1])
  redis.call('SET', KEYS[2], '1', 'PX', tonumber(ARGV[3]))
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3])) end
return 1
"""


@dataclass(frozen=True, slots=True)
class Changed:
    paths: tuple[str, ...]  # oldest first
    more: bool  # older ones were dropped

    def line(self) -> str | None:
        """`changed without approval since the last approval: Makefile, tests/conftest.py`."""
        if not self.paths:
            return None
        more = " (and earlier ones)" if self.more else ""
        return f"changed without approval since the last approval: {', '.join(self.paths)}{more}"


class ChangesRead:
    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.changed = Changed((), False)

    def queue(self, pipe: Any) -> None:
        listed, more = self.keys
        pipe.lrange(listed, 0, -1)
        pipe.exists(more)

    def take(self, replies: Sequence[Any]) -> None:
        paths, marked = replies
        self.changed = Changed(tuple(map(str, paths)), bool(marked))


class UnapprovedChanges:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self._add = redis.register_script(_ADD)

    def _keys(self, session: str) -> list[str]:
        return [
            self.keys.session(session, "unapproved-changes"),
            self.keys.session(session, "unapproved-changes-more"),
        ]

    async def add(self, session: str, path: str) -> None:
        await self._add(keys=self._keys(session), args=[path, MAX_PATHS, TTL_MS])

    async def read(self, session: str) -> Changed:
        pipe = self.redis.pipeline(transaction=False)
        read = self.reader(session)
        read.queue(pipe)
        read.take(await pipe.execute())
        return read.changed

    def reader(self, session: str) -> ChangesRead:
        """The read of `session`'s list, to ride another trip (`runtime.store.runs.Reads`)."""
        return ChangesRead(self._keys(session))

    def queue_reset(self, pipe: Any, session: str) -> None:
        """An approval in the session is being decided: its approver saw the list (queued
        on the decision's pipeline)."""
        pipe.delete(*self._keys(session))
