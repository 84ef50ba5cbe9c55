"""The messages before a Feishu message that the bot has not seen, read through lark-oapi:
in a thread (`im.v1.message.list` of the thread, then its root, which a thread's list may
leave out), along a chain of quote-replies (`im.v1.message.get` walking `parent_id`), or in a
direct chat (`im.v1.message.list` of the chat). Newest first, back to what the bot saw last:
its own message, or one that mentioned it (that one was its own input); oldest first out.

lark-oapi's calls block (its token fetch too): each runs in a thread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from lark_oapi.api.im.v1 import GetMessageRequest, ListMessageRequest

PAGE = 50  # Feishu's largest page of a message list


class HistoryError(Exception):
    """The Open API refused a read (its code and message: never the messages' text)."""


@dataclass(frozen=True, slots=True)
class Where:
    """The message whose past is read: its id and time (ms), and where it sits."""

    message_id: str
    create_time: int
    chat_id: str
    thread_id: str = ""
    root_id: str = ""
    parent_id: str = ""


class History:
    def __init__(self, client: Any, app_id: str, bot_open_id: str) -> None:
        self.client = client
        self.app_id = app_id
        self.bot_open_id = bot_open_id

    async def thread(self, where: Where, limit: int) -> list[Any]:
        """The unseen messages before `where` in its thread or reply chain."""
        if where.thread_id:
            found, ended = await self._walk(self._listed("thread", where.thread_id), where, limit)
            root = where.root_id
            if not ended and len(found) < limit and root and root not in {_id(m) for m in found}:
                message = await self._get(root)
                if message is not None and not (self._seen(message) or message.deleted):
                    found.append(message)
            return found[::-1]
        found, _ = await self._walk(self._parents(where.parent_id), where, limit)
        return found[::-1]

    async def chat(self, where: Where, limit: int) -> list[Any]:
        """The unseen messages before `where` in its (direct) chat."""
        found, _ = await self._walk(self._listed("chat", where.chat_id), where, limit)
        return found[::-1]

    async def _walk(
        self, messages: AsyncIterator[Any], where: Where, limit: int
    ) -> tuple[list[Any], bool]:
        """Up to `limit` messages older than `where`, newest first; and whether the walk
        reached what the bot saw."""
        found: list[Any] = []
        scanned = 0
        async for message in messages:
            scanned += 1
            if scanned > limit + 2 * PAGE:  # pages of messages newer than this one: enough
                break
            if _id(message) == where.message_id or _time(message) >= where.create_time:
                continue  # this one, or one after it
            if self._seen(message):
                return found, True
            if not message.deleted:
                found.append(message)
            if len(found) >= limit:
                break
        return found, False

    def _seen(self, message: Any) -> bool:
        """The bot's own message, or one that mentioned it (the bot was given it then)."""
        sender = message.sender
        if sender is not None and sender.sender_type == "app" and sender.id == self.app_id:
            return True
        return any(m.id == self.bot_open_id for m in message.mentions or [])

    async def _listed(self, kind: str, container: str) -> AsyncIterator[Any]:
        token = ""
        while True:
            builder = (
                ListMessageRequest.builder()
                .container_id_type(kind)
                .container_id(container)
                .sort_type("ByCreateTimeDesc")
                .page_size(PAGE)
            )
            data = await self._list((builder.page_token(token) if token else builder).build())
            for message in data.items or []:
                yield message
            token = data.page_token or ""
            if not data.has_more or not token:
                return

    async def _list(self, request: ListMessageRequest) -> Any:
        return await _call(lambda: self.client.im.v1.message.list(request))

    async def _parents(self, parent_id: str) -> AsyncIterator[Any]:
        seen: set[str] = set()
        while parent_id and parent_id not in seen:
            seen.add(parent_id)
            message = await self._get(parent_id)
            if message is None:
                return
            yield message
            parent_id = message.parent_id or ""

    async def _get(self, message_id: str) -> Any:
        request = GetMessageRequest.builder().message_id(message_id).build()
        data = await _call(lambda: self.client.im.v1.message.get(request))
        items = data.items or []
        return items[0] if items else None


async def _call(call: Callable[[], Any]) -> Any:
    response = await asyncio.to_thread(call)
    if not response.success():
        raise HistoryError(f"code {response.code}: {response.msg}")
    return response.data


def _id(message: Any) -> str:
    return str(message.message_id or "")


def _time(message: Any) -> int:
    try:
        return int(message.create_time or 0)
    except (TypeError, ValueError):
        return 0
