"""A Feishu message as the model gets it (the router's `Reader` for Feishu, asked in the
worker): the thread before it that the bot has not seen, its text, and its images and files,
downloaded into the work dir and named. What cannot be read gets one short reply in the
thread: a file over the limits (the rest of the message still runs), a kind of message not
read yet (then nothing runs). An Open API error costs the context, never the message."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.feishu.content import READS, read_content
from adapters.feishu.history import History, HistoryError, Where
from adapters.feishu.people import Names
from adapters.feishu.resources import DownloadFailed, Resources
from adapters.reading import Prompt
from adapters.thread_context import ContextLimits, Said, render, with_context
from runtime.attachments import AttachmentLimits, AttachmentRefused, Stored
from runtime.channel import Channel, Reply
from runtime.models import Actor
from runtime.policy.service import PolicyService
from runtime.queue.inbound import Inbound

log = logging.getLogger(__name__)

PLATFORM = "feishu"


@dataclass(frozen=True, slots=True)
class ReaderSettings:
    workdir: Path
    context: ContextLimits
    attachments: AttachmentLimits


class FeishuReader:
    def __init__(
        self,
        client: Any,
        app_id: str,
        bot_open_id: str,
        settings: ReaderSettings,
        policies: PolicyService,
        channel: Channel,
        knows: Callable[[str], Awaitable[bool]],
    ) -> None:
        """`channel` says what could not be read; `knows`: whether a session has a history
        (a direct chat's earlier messages are context on its first message only)."""
        self.history = History(client, app_id, bot_open_id)
        self.names = Names(client)
        self.resources = Resources(client, settings.workdir, settings.attachments)
        self.limits = settings.context
        self.policies = policies
        self.channel = channel
        self.knows = knows

    async def read(self, inbound: Inbound, job: str) -> Prompt:
        unread = inbound.source.get("unread")
        if unread:
            await self._tell(inbound, "unread", f"I cannot read {unread} yet; I read {READS}.")
            return Prompt("")
        stored, problems = await self._attachments(inbound)
        if problems:
            await self._tell(inbound, "attachments", "Not read: " + "; ".join(problems) + ".")
        lines = [inbound.text] if inbound.text else []
        lines += [s.line() for s in stored]
        if not lines:
            return Prompt("")  # only refused files: the reply said why
        if problems:  # the model knows too, so it does not answer as if it had them
            lines.append(f"(not read: {'; '.join(problems)})")
        block = render(
            await self._context(inbound), inbound.conversation, self.policies, self.limits
        )
        images = tuple(s.path.as_posix() for s in stored if s.image)
        return Prompt(with_context(block, "\n".join(lines)), images)

    # --- files ---------------------------------------------------------------------------------

    async def _attachments(self, inbound: Inbound) -> tuple[list[Stored], list[str]]:
        stored: list[Stored] = []
        problems: list[str] = []
        for attachment in inbound.attachments:
            try:
                stored.append(await self.resources.take(inbound.message, attachment))
            except AttachmentRefused as exc:
                problems.append(str(exc))
            except DownloadFailed as exc:
                log.warning("feishu: cannot download an attachment (%s)", exc)
                problems.append(f"{attachment.name} could not be downloaded from Feishu ({exc})")
        return stored, problems

    async def _tell(self, inbound: Inbound, what: str, text: str) -> None:
        # Keyed: a retaken job says it again and Feishu keeps the first (its uuid).
        await self.channel.send(
            inbound.conversation, Reply(text, key=f"read/{inbound.message}/{what}")
        )

    # --- the thread ----------------------------------------------------------------------------

    async def _context(self, inbound: Inbound) -> list[Said]:
        if self.limits.messages <= 0 or self.limits.chars <= 0:
            return []
        where = _where(inbound)
        try:
            if inbound.conversation.direct:
                if await self.knows(inbound.session):
                    return []  # every message of a direct chat reaches the bot
                messages = await self.history.chat(where, self.limits.messages)
            elif inbound.needs_session or not (where.root_id or where.parent_id):
                return []  # a reply in the bot's own thread, or a message starting one
            else:
                messages = await self.history.thread(where, self.limits.messages)
            return [await self._said(m) for m in messages]
        except (HistoryError, OSError) as exc:
            log.warning("feishu: no thread context (%s)", exc)
        except Exception as exc:  # lark-oapi's parsing, a refused token fetch
            log.warning("feishu: no thread context (%s)", type(exc).__name__)
        return []

    async def _said(self, message: Any) -> Said:
        sender = message.sender
        text = _text(message)
        if sender is None or sender.sender_type != "user" or not sender.id:
            return Said(None, str(getattr(sender, "id", None) or "an app"), text)
        actor = Actor(platform=PLATFORM, user_id=str(sender.id))
        return Said(actor, await self.names.name(str(sender.id)), text)


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


def _text(message: Any) -> str:
    """An earlier message as the model reads it: its words with mentions by name, and what it
    carried named (its files are not downloaded)."""
    body = message.body
    content = read_content(message.msg_type or "", body.content if body is not None else "")
    if content is None:
        return ""
    if content.unread:
        return f"[{content.unread}]"
    text = content.text
    for mention in _mentions(message.mentions):
        text = text.replace(mention[0], f"@{mention[1]}")
    marks = [
        f"[{a.kind}: {a.name}]" if a.kind != "image" else "[an image]" for a in content.attachments
    ]
    return " ".join([text.strip(), *marks]).strip()


def _mentions(mentions: Sequence[Any] | None) -> list[tuple[str, str]]:
    """(key, name), longest key first: `@_user_1` must not eat the start of `@_user_10`."""
    pairs = [(str(m.key), str(m.name or m.id or "someone")) for m in mentions or [] if m.key]
    return sorted(pairs, key=lambda pair: -len(pair[0]))
