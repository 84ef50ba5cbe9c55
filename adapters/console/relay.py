"""A `clawgate chat` conversation told across processes. When its run resumes elsewhere (an
approval decided with `clawgate approvals approve`, or from a copy of the notice in an
approvers' channel), that process renders the lines as the chat would and appends them to a
capped Redis stream of the conversation; the chat tails the stream and prints them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TextIO

from redis.asyncio import Redis
from redis.exceptions import RedisError

from adapters.console.channel import posted, render
from runtime.channel import Event, MessageRef
from runtime.models import Actor, ConversationRef
from runtime.store.keys import Keys
from runtime.store.streams import last_id, read_after

log = logging.getLogger(__name__)

RELAY_LINES = 1_000  # kept per conversation: a terminal that was away sees no more anyway
RELAY_TTL_S = 86_400


class ConsoleRelay:
    """The console platform's channel in a process other than the chat: each line goes to
    this process's terminal (`out`, when it has one) and to the conversation's stream."""

    def __init__(self, redis: Redis, keys: Keys, out: TextIO | None = None) -> None:
        self.redis = redis
        self.keys = keys
        self.out = out

    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None:
        line = render(event)
        if line is not None:
            await self._line(conversation, line)
        return posted(event)

    async def tell(
        self,
        conversation: ConversationRef,
        actor: Actor,
        text: str,
        reply: Mapping[str, str],
        secret: bool = False,
    ) -> None:
        await self._line(conversation, text)  # a console conversation has one person

    async def _line(self, conversation: ConversationRef, line: str) -> None:
        if self.out is not None:
            self.out.write(line + "\n")
            self.out.flush()
        key = self.keys.console_relay(conversation.id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xadd(key, {"line": line}, maxlen=RELAY_LINES, approximate=True)
            pipe.expire(key, RELAY_TTL_S)
            await pipe.execute()


async def tail(
    redis: Redis, keys: Keys, session: str, show: Callable[[str], None], block_ms: int = 1_000
) -> None:
    """Show each line relayed to `session` after this call starts, as it comes."""
    key = keys.console_relay(session)
    last: str | None = None
    while True:
        try:
            if last is None:  # from the newest entry now: what came before is not news
                last = await last_id(redis, key)
            for entry_id, fields in await read_after(redis, key, last, 100, block_ms):
                last = entry_id
                show(fields.get("line", ""))
        except RedisError as exc:  # the chat says so when it needs Redis; retry quietly
            log.debug("console relay: %s", exc)
            await asyncio.sleep(block_ms / 1000)
