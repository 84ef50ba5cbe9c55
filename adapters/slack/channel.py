"""SlackChannel, runtime events to Slack: each answer one message in the thread, written live
(adapters/slack/stream.py) and what does not fit it posted after; approval notices as Block
Kit updated in place after the decision; files shared in the thread. Posts are made at most
once (adapters/slack/posting.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from aiohttp import ClientConnectorError, ClientError, ClientSession
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.long_answer import DEFAULT_FILE_CHARS, as_file
from adapters.slack.answers import answer_message, answer_pieces
from adapters.slack.posting import Poster
from adapters.slack.questions import notice_blocks, notice_text
from adapters.slack.stream import LiveAnswers
from adapters.slack.text import MAX_TEXT, own_text
from adapters.split import split_text
from runtime.channel import (
    ApprovalRequested,
    ApprovalUpdated,
    Event,
    FileShared,
    MessageRef,
    Notice,
    Reply,
    RunFinished,
    ToolFinished,
    ToolStarted,
    Writing,
)
from runtime.models import Actor, ConversationRef

log = logging.getLogger(__name__)


def web_client(token: str, base_url: str, session: ClientSession | None = None) -> AsyncWebClient:
    """Connection errors and 429s (after Retry-After) are retried by slack_sdk itself: in both
    cases Slack did not act, so nothing is posted twice. Pass a `session` to keep connections
    open across calls (slack_sdk otherwise opens one per call)."""
    return AsyncWebClient(
        token=token,
        base_url=base_url,
        session=session,
        retry_handlers=[
            # Only failures to connect: the request never left, so Slack cannot have acted.
            AsyncConnectionErrorRetryHandler(max_retry_count=2, error_types=[ClientConnectorError]),
            AsyncRateLimitErrorRetryHandler(max_retry_count=4),
        ],
    )


def _where(conversation: ConversationRef) -> dict[str, str]:
    # A conversation named by its id alone (an approvers' channel from the policy):
    # slack:<team>:<channel>.
    channel = conversation.data.get("channel") or conversation.id.rsplit(":", 1)[-1]
    where = {"channel": channel}
    if conversation.data.get("thread_ts"):
        where["thread_ts"] = conversation.data["thread_ts"]
    return where


class SlackChannel:
    def __init__(
        self, client: AsyncWebClient, file_chars: int = DEFAULT_FILE_CHARS, bot_id: str = ""
    ) -> None:
        """`file_chars`: an answer longer than this comes as a message plus a file. `bot_id`:
        the bot's, which its messages carry (asked of auth.test when needed, if not given)."""
        self.client = client
        self.file_chars = file_chars
        self._posts = Poster(client)
        self._answers = LiveAnswers(self._posts, bot_id)

    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None:
        where = _where(conversation)
        if isinstance(event, Reply):
            await self._answer(conversation, where, event)
        elif isinstance(event, Notice):
            self._answers.suspect(where)
            await self._posts.post(where, text=f":information_source: {own_text(event.text)}")
        elif isinstance(event, ApprovalRequested):
            notice = event.notice
            if where["channel"].startswith(("U", "W")):  # a person: their DM with the bot
                dm = await self._direct_channel(where["channel"])
                if dm is None:
                    return None
                where = {"channel": dm}
            ts = await self._posts.post(
                where,
                key=f"approval/{notice.approval_id}/{where['channel']}",
                again=event.again,
                text=notice_text(notice),
                blocks=notice_blocks(notice, copy=event.copy),
            )
            return {"channel": where["channel"], "ts": ts} if ts else None
        elif isinstance(event, ApprovalUpdated):
            notice = event.notice
            if notice.message.get("ts"):
                await self._posts.update(
                    notice.message["channel"],
                    notice.message["ts"],
                    text=notice_text(notice),
                    blocks=notice_blocks(notice, copy=notice.conversation != conversation.id),
                )
            else:  # the notice was never posted: say it anew
                await self._posts.post(
                    where, text=notice_text(notice), blocks=notice_blocks(notice)
                )
        elif isinstance(event, Writing | ToolStarted | ToolFinished | RunFinished):
            await self._answers.progress(conversation, where, event)
        elif isinstance(event, FileShared):
            return await self.upload_file(
                conversation, event.name, event.data, event.title, key=event.key, again=event.again
            )
        return None

    async def tell(
        self,
        conversation: ConversationRef,
        actor: Actor,
        text: str,
        reply: Mapping[str, str],
        secret: bool = False,
    ) -> None:
        """Say something only `actor` sees (command answers, refusals): through the slash
        command's response_url when there is one (works where the bot is not a member)."""
        if reply.get("response_url"):
            webhook = AsyncWebhookClient(reply["response_url"])
            try:
                await webhook.send(text=own_text(text[:MAX_TEXT]), response_type="ephemeral")
            except (ClientError, TimeoutError) as exc:
                log.error("response_url failed: %s", type(exc).__name__)
            return
        where = _where(conversation)
        for piece in split_text(text, MAX_TEXT):
            await self._posts.attempt(
                "chat.postEphemeral",
                self.client.chat_postEphemeral(
                    channel=where["channel"],
                    thread_ts=where.get("thread_ts"),
                    user=actor.user_id,
                    text=own_text(piece),
                ),
            )

    async def upload_file(
        self,
        conversation: ConversationRef,
        name: str,
        data: bytes,
        title: str,
        *,
        key: str = "",
        again: bool = False,
    ) -> MessageRef | None:
        """Share `data` as the file `name` in the conversation (its thread), once (see
        Poster.upload). A file share carries no metadata, so `key`, which Feishu uses, has
        no place here. None when it could not be shared (logged)."""
        return await self._posts.upload(_where(conversation), name, data, title, again)

    async def _answer(
        self, conversation: ConversationRef, where: dict[str, str], reply: Reply
    ) -> None:
        """The answer as Markdown: its first message the one streamed (or edited) while the
        model wrote it, set to exactly the answer and finished with feedback buttons; what
        does not fit follows in more messages, or, longer than `file_chars`, its beginning
        plus the whole of it as a file in the thread. Each message and the file are keyed by
        the answer, so a retake (`again`) posts only what is missing and finishes a message
        a dead process left half-written."""
        filed = as_file(reply.text, reply.key, self.file_chars)
        text = filed.message if filed else reply.text
        pieces = answer_pieces(text)
        await self._answers.answer(where, pieces[0], reply.key, reply.again)
        for i, piece in enumerate(pieces[1:], start=1):
            key = f"{reply.key}/{i}" if reply.key else ""
            await self._posts.post(where, key=key, again=reply.again, **answer_message(piece))
        if filed:
            await self.upload_file(
                conversation, filed.name, filed.data, filed.title, again=reply.again
            )

    async def _direct_channel(self, user: str) -> str | None:
        """The id of the bot's direct-message channel with `user` (opened if need be)."""
        response = await self._posts.attempt(
            "conversations.open", self.client.conversations_open(users=user)
        )
        if not isinstance(response, AsyncSlackResponse):
            return None
        return str(response["channel"]["id"])
