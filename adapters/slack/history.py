"""What was said in a Slack thread (or DM) that the bot has not seen: the messages after its
own last one there and before the message it is asked about, read back through the Web API
(`conversations.replies`, `conversations.history`), their authors named by `users.info`.

Slack lists only what the bot may read (a channel it was invited to, a DM with it): anything
else is refused (`not_in_channel`, `missing_scope`…), and the message then runs without
context. Logs name the error, never a message's text.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.names import NameCache
from adapters.slack.inbound import PLATFORM, SlackIdentity
from adapters.slack.text import clean_text
from adapters.thread_context import Said
from runtime.models import Actor

log = logging.getLogger(__name__)

PAGE = 200  # messages per conversations.replies page (Slack advises at most 200)
MAX_PAGES = 10  # a thread read back at most this far (2,000 messages), oldest first
NAMES_CACHED = 2048  # display names kept in memory, the least recently used dropped first
# Message subtypes that are someone talking (joins, topic changes and the like are not).
_SPOKEN = (None, "thread_broadcast", "file_share", "bot_message", "me_message")


def names(client: AsyncWebClient, size: int = NAMES_CACHED) -> NameCache:
    """Display names by Slack user id (`users.info`), kept for the process: a name that
    cannot be looked up is the id (and asked again next time)."""

    async def look_up(user: str) -> str | None:
        try:
            answer = await client.users_info(user=user)
        except (SlackApiError, ClientError, TimeoutError) as exc:
            log.warning("slack: users.info failed (%s): the id stands for the name", _why(exc))
            return None
        found = answer.get("user") or {}
        profile = found.get("profile") or {}
        name = profile.get("display_name") or found.get("real_name") or found.get("name")
        return str(name) if name else None

    return NameCache(look_up, size)


class History:
    """The unseen messages of a conversation, at most `keep` (the most recent), oldest first."""

    def __init__(self, client: AsyncWebClient, identity: SlackIdentity, names: NameCache) -> None:
        self.client = client
        self.identity = identity
        self.names = names

    async def thread(self, channel: str, thread_ts: str, before: str, keep: int) -> list[Said]:
        """The replies of a thread (its root included) after the bot's last message in it
        and before `before` (a ts). Slack lists replies oldest first, so the pages are read
        up to `before` (at most MAX_PAGES), keeping the last `keep` unseen ones."""
        unseen: deque[dict[str, Any]] = deque(maxlen=keep)
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self._page(
                "conversations.replies",
                self.client.conversations_replies,
                channel=channel,
                ts=thread_ts,
                latest=before,
                inclusive=False,
                limit=PAGE,
                cursor=cursor,
            )
            if page is None:
                return []
            for message in page.get("messages") or []:
                if self._mine(message):
                    unseen.clear()  # the bot saw everything up to its own message
                elif _before(message, before):
                    unseen.append(message)
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not page.get("has_more") or cursor is None:
                break
        return [said for m in unseen if (said := await self._said(m)) is not None]

    async def recent(self, channel: str, before: str, keep: int) -> list[Said]:
        """A DM's last messages before `before`, since the bot's last one (newest first
        from Slack: one page is enough)."""
        page = await self._page(
            "conversations.history",
            self.client.conversations_history,
            channel=channel,
            latest=before,
            inclusive=False,
            limit=keep,
        )
        unseen: list[dict[str, Any]] = []
        for message in (page or {}).get("messages") or []:
            if self._mine(message):
                break
            if _before(message, before):
                unseen.append(message)
        return [said for m in reversed(unseen) if (said := await self._said(m)) is not None]

    async def _page(self, method: str, call: Any, **params: Any) -> Mapping[str, Any] | None:
        try:
            answer = await call(**params)
        except (SlackApiError, ClientError, TimeoutError) as exc:
            # not_in_channel, missing_scope, channel_not_found…: no context, the message runs.
            log.warning("slack: %s failed (%s): no thread context", method, _why(exc))
            return None
        data = answer.data
        return data if isinstance(data, dict) else None

    def _mine(self, message: Mapping[str, Any]) -> bool:
        me = self.identity
        return message.get("user") == me.bot_user_id or message.get("bot_id") == me.bot_id

    async def _said(self, message: Mapping[str, Any]) -> Said | None:
        if message.get("subtype") not in _SPOKEN:
            return None
        text = clean_text(str(message.get("text") or ""), self.identity.bot_user_id)
        files = [str(f.get("name") or f.get("title") or "") for f in message.get("files") or []]
        if any(files):
            text = f"{text} [files: {', '.join(filter(None, files))}]".strip()
        user = message.get("user")
        if message.get("bot_id") or not isinstance(user, str):
            profile = message.get("bot_profile") or {}
            name = profile.get("name") or message.get("username") or message.get("bot_id")
            return Said(None, str(name or "a bot"), text)
        actor = Actor(platform=PLATFORM, user_id=user)
        return Said(actor, await self.names.name(user), text)


def _before(message: Mapping[str, Any], ts: str) -> bool:
    try:
        return float(message.get("ts") or 0) < float(ts)
    except ValueError:
        return False


def _why(exc: Exception) -> str:
    """The error code Slack gave, else the HTTP status (a proxy's HTML page has no code)."""
    if isinstance(exc, SlackApiError):
        data = exc.response.data
        if isinstance(data, dict) and data.get("error"):
            return str(data["error"])
        return f"HTTP {exc.response.status_code}"
    return type(exc).__name__
