"""Runtime events to Slack: answers in the thread, one "working" message updated as tools
run, approval notices as Block Kit updated in place after the decision."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from aiohttp import ClientConnectorError, ClientError, ClientSession
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.long_answer import DEFAULT_FILE_CHARS, as_file
from adapters.progress import Progress, ProgressEvent, Style
from adapters.slack.answers import answer_message, answer_pieces
from adapters.slack.questions import notice_blocks, notice_text
from adapters.slack.text import MAX_TEXT, escape
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
from runtime.models import Actor, ConversationRef, ToolStatus

log = logging.getLogger(__name__)

# Errors that may pass (Slack may or may not have acted): updates are simply repeated, posts
# only after checking they did not land.
_TRANSIENT = {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
ATTEMPTS = 3
POST_EVENT = "clawgate_post"  # metadata event type tagging clawgate's posts
SEARCH_PAGES = 20  # pages of a thread read looking for a post that may have landed
CALM_DOWN = 30.0  # seconds without previews after a rate limit that named no Retry-After

STYLE = Style(
    marks={
        ToolStatus.COMPLETED: ":white_check_mark:",
        ToolStatus.DENIED: ":no_entry:",
        ToolStatus.SUSPENDED: ":lock:",
        ToolStatus.ERROR: ":x:",
        ToolStatus.CANCELLED: ":heavy_minus_sign:",
    },
    running=":hourglass_flowing_sand:",
    line=lambda mark, tool, text: f"{mark} `{tool}` {text}",
    heading="_Working…_",
    footer=lambda stop: f"_{stop}_",
    escape=escape,
)


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
    def __init__(self, client: AsyncWebClient, file_chars: int = DEFAULT_FILE_CHARS) -> None:
        """`file_chars`: an answer longer than this comes as a message plus a file."""
        self.client = client
        self.file_chars = file_chars
        self._progress = Progress(STYLE)
        # Previews of an answer being written are tried once: a rate limit pauses them
        # (the real updates wait it out as slack_sdk's retry handler says).
        self._previews = AsyncWebClient(
            token=client.token,
            base_url=client.base_url,
            session=client.session,
            timeout=client.timeout,
            retry_handlers=[],
        )
        self._previews_paused_until = 0.0

    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None:
        where = _where(conversation)
        if isinstance(event, Reply):
            await self._answer(conversation, where, event)
        elif isinstance(event, Notice):
            await self._post(where, text=f":information_source: {escape(event.text)}")
        elif isinstance(event, ApprovalRequested):
            notice = event.notice
            if where["channel"].startswith(("U", "W")):  # a person: their DM with the bot
                dm = await self._direct_channel(where["channel"])
                if dm is None:
                    return None
                where = {"channel": dm}
            ts = await self._post(
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
                await self._update(
                    notice.message["channel"],
                    notice.message["ts"],
                    text=notice_text(notice),
                    blocks=notice_blocks(notice, copy=notice.conversation != conversation.id),
                )
            else:  # the notice was never posted: say it anew
                await self._post(where, text=notice_text(notice), blocks=notice_blocks(notice))
        elif isinstance(event, ToolStarted | ToolFinished | Writing | RunFinished):
            await self._report(where, event)
        elif isinstance(event, FileShared):
            return await self.upload_file(
                conversation, event.name, event.data, event.title, key=event.key, again=event.again
            )
        return None

    async def tell(
        self, conversation: ConversationRef, actor: Actor, text: str, reply: Mapping[str, str]
    ) -> None:
        """Say something only `actor` sees (command answers, refusals): through the slash
        command's response_url when there is one (works where the bot is not a member)."""
        if reply.get("response_url"):
            webhook = AsyncWebhookClient(reply["response_url"])
            try:
                await webhook.send(text=escape(text[:MAX_TEXT]), response_type="ephemeral")
            except (ClientError, TimeoutError) as exc:
                log.error("response_url failed: %s", type(exc).__name__)
            return
        where = _where(conversation)
        for piece in split_text(text, MAX_TEXT):
            await self._try(
                "chat.postEphemeral",
                self.client.chat_postEphemeral(
                    channel=where["channel"],
                    thread_ts=where.get("thread_ts"),
                    user=actor.user_id,
                    text=escape(piece),
                ),
            )

    async def _answer(
        self, conversation: ConversationRef, where: dict[str, str], reply: Reply
    ) -> None:
        """The answer as Markdown in as few messages as fit, or, longer than `file_chars`,
        its beginning plus the whole of it as a file in the thread. Each post and the file
        are keyed by the answer, so a retake (`again`) posts only what is missing."""
        filed = as_file(reply.text, reply.key, self.file_chars)
        text = filed.message if filed else reply.text
        for i, piece in enumerate(answer_pieces(text)):
            key = f"{reply.key}/{i}" if reply.key else ""
            await self._post(where, key=key, again=reply.again, **answer_message(piece))
        if filed:
            await self.upload_file(
                conversation, filed.name, filed.data, filed.title, again=reply.again
            )

    # --- the working message ---------------------------------------------------------------

    async def _report(self, where: dict[str, str], event: ProgressEvent) -> None:
        show = self._progress.apply((where["channel"], where.get("thread_ts", "")), event)
        if show is None:
            return
        if show.wait:
            await asyncio.sleep(show.wait)
        if show.working.ref is None:
            ts = await self._post(where, text=show.text)
            if not isinstance(event, RunFinished):
                show.working.ref = ts
        elif show.preview:
            await self._preview(where["channel"], show.working.ref, show.text)
        else:
            await self._update(where["channel"], show.working.ref, text=show.text)
        self._progress.shown(show)

    async def _preview(self, channel: str, ts: str, text: str) -> None:
        if time.monotonic() < self._previews_paused_until:
            return
        try:
            await self._previews.chat_update(channel=channel, ts=ts, text=text)
        except SlackApiError as exc:
            answer = exc.response
            if int(getattr(answer, "status_code", 0) or 0) == 429:
                sent = getattr(answer, "headers", None) or {}
                headers = {str(k).lower(): v for k, v in sent.items()}
                try:
                    pause = float(headers.get("retry-after", CALM_DOWN))
                except (TypeError, ValueError):
                    pause = CALM_DOWN
                self._previews_paused_until = time.monotonic() + max(pause, 1.0)
            error = answer.get("error", "?") if hasattr(answer, "get") else "?"
            log.warning("chat.update of a preview failed: %s", error)
        except (ClientError, TimeoutError) as exc:
            log.warning("chat.update of a preview failed: %s", type(exc).__name__)

    # --- Web API calls ---------------------------------------------------------------------

    async def _direct_channel(self, user: str) -> str | None:
        """The id of the bot's direct-message channel with `user` (opened if need be)."""
        response = await self._try("conversations.open", self.client.conversations_open(users=user))
        if not isinstance(response, AsyncSlackResponse):
            return None
        return str(response["channel"]["id"])

    async def _post(
        self,
        where: dict[str, str],
        key: str = "",
        again: bool = False,
        instead: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> str | None:
        """Post once, even through failures after which Slack may have posted anyway (5xx,
        a dropped connection): every post carries a tag in its metadata (`key`, else a random
        one), and before posting again the conversation is searched for it. `again`: the
        post may be there from before a crash: searched for first. `instead`: the fields to
        post if Slack refuses these (an error after which it did not post, such as
        `invalid_blocks`), under the same tag."""
        tag = key or uuid.uuid4().hex
        metadata = {"event_type": POST_EVENT, "event_payload": {"post": tag}}
        channel, thread_ts = where["channel"], where.get("thread_ts")

        def tagged(message: Mapping[str, Any]) -> bool:
            return bool(
                ((message.get("metadata") or {}).get("event_payload") or {}).get("post") == tag
            )

        def post(fields: Mapping[str, Any]) -> Awaitable[AsyncSlackResponse]:
            return self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, metadata=metadata, **fields
            )

        done = await self._once(
            where,
            "chat.postMessage",
            lambda: post(fields),
            tagged,
            again,
            instead=None if instead is None else lambda: post(instead),
        )
        return done if done is None or isinstance(done, str) else str(done["ts"])

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
        """Share `data` as the file `name` in the conversation (its thread), through
        files.getUploadURLExternal, the upload and files.completeUploadExternal (slack_sdk's
        files_upload_v2). Once: a file share carries no metadata (so `key`, which Feishu
        uses, has no place here): after a failure Slack may have acted on, or with `again`
        (a retake), the thread is searched first for a file of the same name, title and
        size. None when it could not be shared (logged)."""
        where = _where(conversation)
        channel = where["channel"]

        def same(message: Mapping[str, Any]) -> bool:
            return any(
                shared.get("name") == name
                and shared.get("title") == title
                and shared.get("size") == len(data)
                for shared in message.get("files") or []
            )

        done = await self._once(
            where,
            "files.completeUploadExternal",
            lambda: self.client.files_upload_v2(
                channel=channel,
                thread_ts=where.get("thread_ts"),
                file=data,
                filename=name,
                title=title,
            ),
            same,
            again,
        )
        if done is None:
            return None
        if isinstance(done, str):
            return {"channel": channel, "ts": done}
        return {"channel": channel, "file": str((done.get("file") or {}).get("id", ""))}

    async def _once(
        self,
        where: dict[str, str],
        method: str,
        call: Callable[[], Awaitable[AsyncSlackResponse]],
        landed: Callable[[Mapping[str, Any]], bool],
        again: bool,
        instead: Callable[[], Awaitable[AsyncSlackResponse]] | None = None,
    ) -> AsyncSlackResponse | str | None:
        """Make `call` (a post) at most once in effect: the response, the ts of the message
        `landed` recognizes in the conversation (found before posting when `again`, or
        after a failure Slack may have acted on), or None when it failed. A call Slack
        refuses is made `instead`, when given."""
        channel, thread_ts = where["channel"], where.get("thread_ts")
        if again:
            checked, ts = await self._find_post(channel, thread_ts, landed)
            if ts is not None:
                return ts
        for attempt in range(1, ATTEMPTS + 1):
            response = await self._try(method, call())
            if isinstance(response, AsyncSlackResponse):
                return response
            if response == "fail":
                if instead is None:
                    return None
                return await self._once(where, method, instead, landed, again=False)
            await asyncio.sleep(0.5 * attempt)  # let a post Slack did store show up first
            checked, ts = await self._find_post(channel, thread_ts, landed)
            if ts is not None or not checked:  # it landed, or we cannot tell: never twice
                return ts
        log.error("%s gave up after %d attempts", method, ATTEMPTS)
        return None

    async def _find_post(
        self, channel: str, thread_ts: str | None, landed: Callable[[Mapping[str, Any]], bool]
    ) -> tuple[bool, str | None]:
        """(whether the search worked, the ts of the message `landed` recognizes). A
        thread is read from its start (Slack lists replies oldest first), page by page; a
        channel from its newest message. A search cut short counts as not done."""
        cursor: str | None = None
        for _ in range(SEARCH_PAGES):
            try:
                if thread_ts:
                    page = await self.client.conversations_replies(
                        channel=channel, ts=thread_ts, cursor=cursor, include_all_metadata=True
                    )
                else:
                    page = await self.client.conversations_history(
                        channel=channel, limit=100, include_all_metadata=True
                    )
            except (SlackApiError, ClientError, TimeoutError) as exc:
                log.warning("cannot check whether a failed post landed (%s)", type(exc).__name__)
                return False, None
            for message in page.get("messages") or []:
                if landed(message):
                    return True, str(message["ts"])
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not thread_ts or not page.get("has_more") or not cursor:
                return True, None
        return False, None

    async def _update(self, channel: str, ts: str, **fields: Any) -> None:
        """Updates are safe to repeat, so any failure that may pass is retried."""
        for attempt in range(1, ATTEMPTS + 1):
            update = self.client.chat_update(channel=channel, ts=ts, **fields)
            if await self._try("chat.update", update) != "retry":
                return
            await asyncio.sleep(0.2 * attempt)
        log.error("chat.update gave up after %d attempts", ATTEMPTS)

    async def _try(
        self, method: str, call: Awaitable[AsyncSlackResponse]
    ) -> AsyncSlackResponse | Literal["retry", "fail"]:
        """The response, or whether the failure may pass ("retry") or not ("fail"). Failures
        are logged, never raised into the run: its state is in Redis, and `/pending` still
        shows a notice that could not be posted."""
        try:
            return await call
        except SlackApiError as exc:
            # slack_sdk may attach the raw HTTP response when Slack's body was not JSON.
            answer = exc.response
            error = str(answer.get("error", "unknown error")) if hasattr(answer, "get") else "?"
            status = int(getattr(answer, "status_code", getattr(answer, "status", 0)) or 0)
            if error not in _TRANSIENT and status < 500:
                log.error("%s failed: %s", method, error)
                return "fail"
            log.warning("%s failed: %s", method, error)
        except (ClientError, TimeoutError, SlackRequestError) as exc:
            # SlackRequestError: files_upload_v2's upload step failed; nothing was shared.
            log.warning("%s failed: %s", method, type(exc).__name__)
        return "retry"
