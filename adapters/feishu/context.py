"""The thread before a Feishu message, as the model is given it: the messages the bot has not
seen (adapters/feishu/history.py), each by its sender's name, its words with mentions named,
and its images and files: the newest few downloaded like the message's own (a teammate posts
the log, another asks the bot about it), the rest named. Rendering and bounds are
adapters/thread_context.py's."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.feishu.content import read_content
from adapters.feishu.history import History, HistoryError, Where
from adapters.feishu.resources import DownloadFailed, Resources
from adapters.names import NameCache
from adapters.thread_context import ContextLimits, Said
from runtime.attachments import AttachmentRefused, Stored
from runtime.models import Actor, ConversationRef
from runtime.policy.service import PolicyService
from runtime.queue.inbound import Attachment, Inbound

log = logging.getLogger(__name__)

PLATFORM = "feishu"
FILES = 5  # files and images of earlier messages downloaded, the newest first


@dataclass(frozen=True, slots=True)
class Earlier:
    said: list[Said] = field(default_factory=list)
    images: tuple[str, ...] = ()  # of those messages, stored in the work dir


class ThreadContext:
    def __init__(
        self,
        history: History,
        names: NameCache,
        resources: Resources,
        limits: ContextLimits,
        policies: PolicyService,
    ) -> None:
        self.history = history
        self.names = names
        self.resources = resources
        self.limits = limits
        self.policies = policies

    async def before(self, inbound: Inbound, first: bool) -> Earlier:
        """`first`: the session has no history yet (a direct chat's past is read then only).
        An Open API error is logged (its code, never text) and gives no context."""
        if self.limits.messages <= 0 or self.limits.chars <= 0:
            return Earlier()
        where = _where(inbound)
        try:
            if inbound.conversation.direct:
                if not first:
                    return Earlier()  # every message of a direct chat reaches the bot
                messages = await self.history.chat(where, self.limits.messages)
            elif inbound.needs_session or not (where.root_id or where.parent_id):
                return Earlier()  # a reply in the bot's own thread, or one starting a thread
            else:
                messages = await self.history.thread(where, self.limits.messages)
            return await self._earlier(messages, inbound.conversation)
        except (HistoryError, OSError) as exc:
            log.warning("feishu: no thread context (%s)", exc)
        except Exception as exc:  # lark-oapi's parsing, a refused token fetch
            log.warning("feishu: no thread context (%s)", type(exc).__name__)
        return Earlier()

    async def _earlier(self, messages: Sequence[Any], conversation: ConversationRef) -> Earlier:
        said: list[Said] = []
        images: list[str] = []
        budget = FILES
        access = self.policies.resolve(conversation.id, {})
        for message in reversed(messages):  # the newest files first
            who = _actor(message)
            outsider = who is not None and access.access_refusal(who, conversation.direct)
            if outsider and self.limits.outsiders == "omit":
                continue  # left out, its files too
            body = message.body
            content = read_content(message.msg_type or "", body.content if body else "")
            marks = []
            for attachment in content.attachments if content else ():
                if budget <= 0:
                    marks.append(_named(attachment))
                    continue
                budget -= 1
                stored = await self._take(str(message.message_id), attachment)
                if isinstance(stored, str):
                    marks.append(stored)
                else:
                    marks.append(f"[{stored.line()}]")
                    if stored.image:
                        images.append(stored.path.as_posix())
            text = "" if content is None else _words(content.text, content.unread, message)
            said.append(await self._said(message, who, " ".join(filter(None, [text, *marks]))))
        return Earlier(said[::-1], tuple(images[::-1]))

    async def _take(self, message_id: str, attachment: Attachment) -> Stored | str:
        try:
            return await self.resources.take(message_id, attachment)
        except (AttachmentRefused, DownloadFailed) as exc:
            return f"[{_named(attachment)[1:-1]}, not read: {exc}]"

    async def _said(self, message: Any, actor: Actor | None, text: str) -> Said:
        if actor is None:
            return Said(None, str(getattr(message.sender, "id", None) or "an app"), text)
        return Said(actor, await self.names.name(actor.user_id), text)


def _actor(message: Any) -> Actor | None:
    """The person who sent `message`; None for an app or a bot."""
    sender = message.sender
    if sender is None or sender.sender_type != "user" or not sender.id:
        return None
    return Actor(platform=PLATFORM, user_id=str(sender.id))


def _where(inbound: Inbound) -> Where:
    source = inbound.source
    try:
        created = int(source.get("create_time", "0"))
    except ValueError:
        created = 0
    return Where(
        message_id=inbound.message,
        create_time=created or 2**62,  # unknown: every earlier message is before it
        chat_id=inbound.conversation.data.get("chat_id", ""),
        thread_id=source.get("thread_id", ""),
        root_id=source.get("root_id", ""),
        parent_id=source.get("parent_id", ""),
    )


def _words(text: str, unread: str | None, message: Any) -> str:
    """An earlier message's words, its mentions by name (`@_user_1` is a key, as in events)."""
    if unread:
        return f"[{unread}]"
    for key, name in _mentions(message.mentions):
        text = text.replace(key, f"@{name}")
    return text.strip()


def _named(attachment: Attachment) -> str:
    return "[an image]" if attachment.kind == "image" else f"[{attachment.kind}: {attachment.name}]"


def _mentions(mentions: Sequence[Any] | None) -> list[tuple[str, str]]:
    """(key, name), longest key first: `@_user_1` must not eat the start of `@_user_10`."""
    pairs = [(str(m.key), str(m.name or m.id or "someone")) for m in mentions or [] if m.key]
    return sorted(pairs, key=lambda pair: -len(pair[0]))
