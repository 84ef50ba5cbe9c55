"""A Slack message as the model gets it (`adapters.reading.Reader`), read in the worker: the
thread before it that the bot has not seen (`history.py`), the person's text, and the files
they attached, downloaded into the work dir (`download.py`, `runtime.attachments.store`)
and named for the model; images also as `Prompt.images`.

A file that is not taken (too large, a type not taken, not downloadable) is said once in
the thread, with the limit; the rest of the message still runs. A message that is nothing
but such files is answered by that one reply alone.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import ClientError, ClientSession
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from yarl import URL

from adapters.reading import Prompt, ReadingLimits
from adapters.slack.download import DownloadFailed, download
from adapters.slack.history import History
from adapters.thread_context import render, with_context
from runtime.attachments import AttachmentRefused, Stored, store
from runtime.channel import Event, MessageRef, Reply
from runtime.models import ConversationRef
from runtime.policy.service import PolicyService
from runtime.queue.inbound import Attachment, Inbound
from runtime.redact import redact_text

log = logging.getLogger(__name__)

Send = Callable[[ConversationRef, Event], Awaitable[MessageRef | None]]
Knows = Callable[[str], Awaitable[bool]]


class SlackReader:
    def __init__(
        self,
        client: AsyncWebClient,
        history: History,
        http: ClientSession,
        *,
        policies: PolicyService,
        limits: ReadingLimits,
        send: Send,
        knows: Knows,
    ) -> None:
        """`send`: how the refusal of a file reaches the thread (the router's, so a job taken
        over by another process is answered by that one); `knows`: whether a session has a
        history (a DM's earlier messages are context for its first message only)."""
        self.client = client
        self.history = history
        self.http = http
        self.policies = policies
        self.limits = limits
        self.send = send
        self.knows = knows
        self.api = URL(client.base_url)

    async def read(self, inbound: Inbound, job: str) -> Prompt:
        stored, refused = await self._attachments(inbound)
        if refused:
            await self._tell_refused(inbound, refused)
        if not inbound.text and not stored:
            return Prompt("")  # nothing to read but what was refused: that reply is the answer
        said = [inbound.text, *(s.line() for s in stored)]
        said += [f"(not taken: {why})" for why in refused]
        block = await self._context(inbound)
        text = with_context(block, "\n".join(filter(None, said)))
        return Prompt(text, tuple(s.path.as_posix() for s in stored if s.image))

    # --- the thread before the message -----------------------------------------------------

    async def _context(self, inbound: Inbound) -> str:
        limits = self.limits.context
        where, message = inbound.conversation.data, inbound.message
        if not message or limits.messages <= 0 or limits.chars <= 0:
            return ""
        channel, thread = where.get("channel", ""), where.get("thread_ts")
        if thread and thread != message:
            said = await self.history.thread(channel, thread, message, limits.messages)
        elif not thread and channel.startswith("D") and not await self.knows(inbound.session):
            said = await self.history.recent(channel, message, limits.messages)
        else:
            return ""  # a thread this message starts, or a DM already under way
        return render(said, inbound.conversation, self.policies, limits)

    # --- attached files --------------------------------------------------------------------

    async def _attachments(self, inbound: Inbound) -> tuple[list[Stored], list[str]]:
        stored: list[Stored] = []
        refused: list[str] = []
        # A ts is unique in its channel only: the folder is named by both.
        folder = f"{inbound.conversation.data.get('channel', '')}-{inbound.message}"
        for attachment in inbound.attachments:
            try:
                stored.append(await self._store(folder, attachment))
            except AttachmentRefused as exc:
                refused.append(str(exc))
            except DownloadFailed as exc:
                log.warning("slack: attachment %s not downloaded: %s", attachment.key, exc)
                refused.append(str(exc))
        return stored, refused

    async def _store(self, message: str, attachment: Attachment) -> Stored:
        async def fetch(max_bytes: int) -> bytes:
            url = await self._url(attachment)
            return await download(
                self.http,
                url,
                self.client.token or "",
                self.api,
                max_bytes,
                attachment.name,
                attachment.mimetype,
            )

        return await store(self.limits.workdir, message, attachment, fetch, self.limits.attachments)

    async def _url(self, attachment: Attachment) -> str:
        """Its download URL: in the event, or (Slack Connect's `check_file_info`) from
        files.info; none for a file Slack withholds (a tombstone, over a plan's limit)."""
        url = attachment.source.get("url")
        if url:
            return url
        if attachment.source.get("file_access") != "check_file_info":
            mode = attachment.source.get("mode") or "no download URL"
            raise DownloadFailed(f"{attachment.name} is not available to the bot ({mode})")
        try:
            info = await self.client.files_info(file=attachment.key)
        except (SlackApiError, ClientError, TimeoutError) as exc:
            raise DownloadFailed(f"{attachment.name}: files.info failed") from exc
        url = (info.get("file") or {}).get("url_private_download")
        if not url:
            raise DownloadFailed(f"{attachment.name} is not available to the bot")
        return str(url)

    async def _tell_refused(self, inbound: Inbound, refused: list[str]) -> None:
        """Once per message, retakes included (`again`: posted only if not there yet)."""
        types = ", ".join(self.limits.attachments.types)
        lines = [f"I did not take {len(refused)} attached file(s):", *(f"• {r}" for r in refused)]
        lines.append(f"I take files of these types: {types}.")
        text = redact_text("\n".join(lines))
        key = f"attachments-refused/{inbound.message}"
        await self.send(inbound.conversation, Reply(text, key=key, again=True))
