"""Per-session conversation history: an append-only Redis list of JSON messages."""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from runtime.models import MESSAGE_ADAPTER, Message
from runtime.store.keys import Keys


class HistoryStore:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def append(self, session: str, *messages: Message) -> int:
        """Append in one command (all or nothing); returns the new length."""
        if not messages:
            return await self.length(session)
        payload = [encode_message(m) for m in messages]
        return int(await self.redis.rpush(self.keys.history(session), *payload))

    async def append_and_load(self, session: str, message: Message) -> list[Message]:
        """Append one message and return the whole history, in one round trip."""
        key = self.keys.history(session)
        pipe = self.redis.pipeline(transaction=True)
        pipe.rpush(key, encode_message(message))
        pipe.lrange(key, 0, -1)
        _, raw = await pipe.execute()
        return parse_history(raw)

    async def load(self, session: str) -> list[Message]:
        return parse_history(await self.redis.lrange(self.keys.history(session), 0, -1))

    async def length(self, session: str) -> int:
        return int(await self.redis.llen(self.keys.history(session)))


def encode_message(message: Message) -> str:
    return MESSAGE_ADAPTER.dump_json(message, exclude_none=True).decode()


def parse_history(raw: Sequence[str | bytes]) -> list[Message]:
    return [MESSAGE_ADAPTER.validate_json(item) for item in raw]
