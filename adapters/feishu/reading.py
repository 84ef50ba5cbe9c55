"""A Feishu message as the model gets it (the router's `Reader` for Feishu, asked in the
worker): the thread before it that the bot has not seen, its text, and its images and files,
downloaded into the work dir and named. What cannot be read gets one short reply in the
thread: a file over the limits (the rest of the message still runs), a kind of message not
read yet (then nothing runs). An Open API error costs the context, never the message."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from adapters.feishu.content import READS
from adapters.feishu.context import ThreadContext
from adapters.feishu.history import History
from adapters.feishu.people import names
from adapters.feishu.resources import DownloadFailed, Resources
from adapters.reading import Prompt, ReadingLimits
from adapters.thread_context import render, with_context
from runtime.attachments import AttachmentRefused, Stored
from runtime.channel import Channel, Reply
from runtime.policy.service import PolicyService
from runtime.queue.inbound import Inbound
from runtime.redact import shown

log = logging.getLogger(__name__)


class FeishuReader:
    def __init__(
        self,
        client: Any,
        app_id: str,
        bot_open_id: str,
        settings: ReadingLimits,
        policies: PolicyService,
        channel: Channel,
        knows: Callable[[str], Awaitable[bool]],
    ) -> None:
        """`channel` says what could not be read; `knows`: whether a session has a history
        (a direct chat's earlier messages are context on its first message only)."""
        self.resources = Resources(client, settings.workdir, settings.attachments)
        history = History(client, app_id, bot_open_id)
        self.context = ThreadContext(
            history, names(client), self.resources, settings.context, policies
        )
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
        first = inbound.conversation.direct and not await self.knows(inbound.session)
        earlier = await self.context.before(inbound, first)
        block = render(earlier.said, inbound.conversation, self.policies, self.limits)
        images = earlier.images + tuple(s.path.as_posix() for s in stored if s.image)
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
        # Keyed: a retaken job says it again and Feishu keeps the first (its uuid). Shown as
        # every answer is: a file's name is a person's text.
        key = f"read/{inbound.message}/{what}"
        await self.channel.send(inbound.conversation, Reply(shown(text), key=key))
