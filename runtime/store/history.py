"""Per-session conversation history: an append-only Redis list of JSON messages.

Nothing ever removes or rewrites an element, so an index names the same message for good:
a run reads only the part it needs (its `Window`) by index range: handed back by the script
that lets it go on (WINDOW_LUA: a run entering, a decision), or with one LRANGE. Never the
whole history: through Lua, every element is copied in and out again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter
from redis.asyncio import Redis

from runtime.models import MESSAGE_ADAPTER, Message
from runtime.ownership.lease import guard
from runtime.store.keys import Keys
from runtime.store.summary import Summary, parse_summary

# One parse per read: pydantic-core walks the whole list in Rust, where validating each
# message on its own costs a Python call (and its overhead) per message.
MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


@dataclass(frozen=True, slots=True)
class Window:
    """The part of a session's history a run holds: `messages` are `history[base:]` as they
    stood when it was read; `summary` stands for `history[0:summary.upto]`, what the model is
    not sent (see runtime/context)."""

    base: int = 0
    messages: list[Message] = field(default_factory=list)
    summary: Summary | None = None

    @property
    def end(self) -> int:
        """The history's length as read: the index the next message gets."""
        return self.base + len(self.messages)


class HistoryStore:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def append(self, session: str, *messages: Message) -> int:
        """Append in one command (all or nothing); returns the new length."""
        if not messages:
            return await self.length(session)
        await guard()
        payload = [encode_message(m) for m in messages]
        return int(await self.redis.rpush(self.keys.history(session), *payload))

    async def load(self, session: str) -> list[Message]:
        """The whole history (the audit, tests): runs read their `Window` instead."""
        return parse_history(await self.redis.lrange(self.keys.history(session), 0, -1))

    async def since(self, session: str, start: int) -> list[Message]:
        """The history from index `start` on: what was appended after a run read its window."""
        return parse_history(await self.redis.lrange(self.keys.history(session), start, -1))

    async def length(self, session: str) -> int:
        return int(await self.redis.llen(self.keys.history(session)))


def encode_message(message: Message) -> str:
    return MESSAGE_ADAPTER.dump_json(message, exclude_none=True).decode()


def parse_history(raw: Sequence[str | bytes]) -> list[Message]:
    """Stored messages, parsed as one JSON array (one call into pydantic-core)."""
    if not raw:
        return []
    items = [item.decode() if isinstance(item, bytes) else item for item in raw]
    return MESSAGES_ADAPTER.validate_json("[" + ",".join(items) + "]")


# Lua: appends to `reply` where a run's window begins and its messages, so the script that
# lets a run go on hands it its window in the same trip: history `key` from where the summary
# (hash `summary`) ends, or from `start` if earlier, up to `length` (see `read_window`).
WINDOW_LUA = """
local function window(reply, key, summary, length, start)
  local upto = tonumber(redis.call('HGET', summary, 'upto') or '0')
  local first = math.max(0, math.min(upto, start, length))
  reply[#reply + 1] = first
  if first < length then
    for _, m in ipairs(redis.call('LRANGE', key, first, length - 1)) do
      reply[#reply + 1] = m
    end
  end
  return reply
end
"""


def returned_window(reply: Sequence[Any], at: int, summary_raw: str | bytes | None) -> Window:
    """The window a script appended (WINDOW_LUA) from `reply[at]` on."""
    return Window(int(reply[at]), parse_history(reply[at + 1 :]), parse_summary(summary_raw))


def window_start(summary: Summary | None, run_start: int | None = None) -> int:
    """Where a run's read begins: at what the summary does not cover, or earlier at the
    run's own first message (a retake looks at its whole turn, and its indices must hold)."""
    start = summary.upto if summary is not None else 0
    return start if run_start is None else min(start, run_start)


async def read_window(
    redis: Redis,
    keys: Keys,
    session: str,
    length: int,
    summary_raw: str | bytes | None,
    run_start: int | None = None,
) -> Window:
    """The window of a history that held `length` messages when a script looked at it (with
    the summary record it found), read right after with one LRANGE.

    Consistent although it is a second command: history is append-only, so the range
    `[start, length)` holds exactly what it held when the script ran, whatever was appended
    since (the read stops at `length - 1`, never at "the end"). In practice nothing is:
    a session's inputs run one at a time (one lane), and the only writer outside its run, a
    settled approval's CLOSE, writes only while the session waits, when no run reads."""
    summary = parse_summary(summary_raw)
    start = max(0, min(window_start(summary, run_start), length))
    if length <= start:
        return Window(start, [], summary)
    raw = await redis.lrange(keys.history(session), start, length - 1)
    return Window(start, parse_history(raw), summary)
