"""Runtime events to Slack: each answer one message in the thread, streamed as the model
writes it (chat.startStream/appendStream/stopStream; where the workspace refuses streaming,
posted early and edited as it grows), tool progress as the thread's assistant status,
approval notices as Block Kit updated in place after the decision."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
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
from adapters.slack.answers import (
    answer_message,
    answer_pieces,
    feedback_blocks,
    markdown_text,
    steps_blocks,
)
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
from runtime.models import Actor, ConversationRef, StopReason, ToolStatus

log = logging.getLogger(__name__)

# Errors that may pass (Slack may or may not have acted): updates are simply repeated, posts
# only after checking they did not land.
_TRANSIENT = {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
ATTEMPTS = 3
POST_EVENT = "clawgate_post"  # metadata event type tagging clawgate's posts
SEARCH_PAGES = 20  # pages of a thread read looking for a post that may have landed
CALM_DOWN = 30.0  # seconds without previews after a rate limit that named no Retry-After
OPEN = "open/"  # the tag of an answer message still being written (a retake finishes it)
APPEND_INTERVAL = 0.5  # seconds between two appends to a streamed answer, at least
EDIT_INTERVAL = 1.0  # seconds between two edits of an answer being written (about Slack's 1/s)
STREAM_CHARS = 10_000  # of an answer streamed; the end of a longer one comes with the last call
# chat.startStream's answers from a workspace (or token, or conversation) without streaming:
# such answers are posted and edited instead, and this process does not ask again.
NO_STREAMING = frozenset(
    {
        "not_allowed",
        "not_allowed_token_type",
        "feature_not_enabled",
        "method_not_supported_for_channel_type",
        "unknown_method",
        "missing_scope",
        "not_supported",
    }
)
WAITING = "Waiting for approval from an approver…"
ASKING = "Waiting for an answer from the person who asked…"  # a clarify question
MARKS = {
    ToolStatus.COMPLETED: ":white_check_mark:",
    ToolStatus.DENIED: ":no_entry:",
    ToolStatus.SUSPENDED: ":lock:",
    ToolStatus.ERROR: ":x:",
    ToolStatus.CANCELLED: ":heavy_minus_sign:",
}


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


@dataclass
class _Writing:
    """An answer message being written in a thread: streamed (`streaming`), or posted and
    edited as it grows."""

    ts: str
    streaming: bool
    shown: str = ""  # the Markdown it holds so far
    text: str = ""  # the answer as written that it shows
    broken: bool = False  # the answer no longer extends what is shown: set right at the end
    at: float = -math.inf  # when it last grew


def _place(where: Mapping[str, str]) -> tuple[str, str]:
    return where["channel"], where.get("thread_ts", "")


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
        self._writing: dict[tuple[str, str], _Writing] = {}  # (channel, thread) -> its answer
        # The tool calls of a thread's run so far, one line each: listed under its answer.
        self._steps: dict[tuple[str, str], list[str]] = {}
        # Threads where a process may have died writing an answer (a retake says so with a
        # Notice first): the next answer there looks for the message it left.
        self._suspect: set[tuple[str, str]] = set()
        self._streams = True  # False once the workspace refused chat.startStream
        self._statuses = True  # False once it refused assistant.threads.setStatus
        self._bot_id: str | None = bot_id or None
        # Edits and appends of an answer being written, and statuses, are tried once: a rate
        # limit pauses them (the final answer waits it out as slack_sdk's retry handler says).
        self._quick = AsyncWebClient(
            token=client.token,
            base_url=client.base_url,
            session=client.session,
            timeout=client.timeout,
            retry_handlers=[],
        )
        self._quick_paused_until = 0.0

    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None:
        where = _where(conversation)
        if isinstance(event, Reply):
            await self._answer(conversation, where, event)
        elif isinstance(event, Notice):
            self._suspect.add(_place(where))
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
        elif isinstance(event, Writing | ToolStarted | ToolFinished | RunFinished):
            await self._progress(conversation, where, event)
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
        """The answer as Markdown: its first message the one streamed (or edited) while the
        model wrote it, set to exactly the answer and finished with feedback buttons; what
        does not fit follows in more messages, or, longer than `file_chars`, its beginning
        plus the whole of it as a file in the thread. Each message and the file are keyed by
        the answer, so a retake (`again`) posts only what is missing and finishes a message
        a dead process left half-written."""
        filed = as_file(reply.text, reply.key, self.file_chars)
        text = filed.message if filed else reply.text
        pieces = answer_pieces(text)
        first = f"{reply.key}/0" if reply.key else ""
        below = []
        if reply.key:  # the final answer: what the run did, and how the answer was
            below = [*steps_blocks(self._steps.pop(_place(where), [])), *feedback_blocks(reply.key)]
        writing = self._writing.pop(_place(where), None)
        if writing is None and (reply.again or _place(where) in self._suspect):
            if first and await self._tagged(where, first):
                pieces[0] = ""  # there, finished: only what follows it may be missing
            else:
                writing = await self._left(where)
        if writing is not None:
            await self._finish(where, writing, pieces[0], first, below)
        elif pieces[0]:
            fields = answer_message(pieces[0])
            fields["blocks"] = [*fields["blocks"], *below]
            await self._post(where, key=first, again=reply.again, **fields)
        for i, piece in enumerate(pieces[1:], start=1):
            key = f"{reply.key}/{i}" if reply.key else ""
            await self._post(where, key=key, again=reply.again, **answer_message(piece))
        if filed:
            await self.upload_file(
                conversation, filed.name, filed.data, filed.title, again=reply.again
            )

    # --- the answer being written ----------------------------------------------------------

    async def _progress(
        self,
        conversation: ConversationRef,
        where: dict[str, str],
        event: Writing | ToolStarted | ToolFinished | RunFinished,
    ) -> None:
        if isinstance(event, Writing):
            await self._grow(conversation, where, event.text)
        elif isinstance(event, ToolStarted):
            await self._status(where, f"Running {event.tool}…")
        elif isinstance(event, ToolFinished):
            line = f"{MARKS.get(event.status, '')} `{event.tool}` {escape(event.display[:120])}"
            self._steps.setdefault(_place(where), []).append(line)
            if event.status == ToolStatus.SUSPENDED:
                await self._status(where, ASKING if event.tool == "clarify" else WAITING)
        else:
            await self._finished(where, event.stop_reason)

    async def _grow(self, conversation: ConversationRef, where: dict[str, str], text: str) -> None:
        """The answer so far into its message: appended to the stream, or (no streaming) the
        message edited at most once per EDIT_INTERVAL; started at its first words."""
        text = text[:STREAM_CHARS]
        shown = markdown_text(text)
        if not shown.strip():
            return
        place = _place(where)
        writing = self._writing.get(place)
        if writing is None:
            if place in self._suspect:
                self._suspect.discard(place)
                writing = await self._left(where)
            writing = writing or await self._start(conversation, where, text)
            if writing is not None:
                writing.at = time.monotonic()
                self._writing[place] = writing
                if writing.shown != shown and not writing.streaming:
                    await self._edit(where, writing, text)
            return
        if writing.broken or shown == writing.shown:
            return
        now = time.monotonic()
        if not writing.streaming:
            if now - writing.at >= EDIT_INTERVAL:
                await self._edit(where, writing, text)
            return
        if not shown.startswith(writing.shown):  # rewritten: the final answer sets it right
            writing.broken = True
        elif now - writing.at >= APPEND_INTERVAL:
            writing.at = now
            appended = await self._once_quietly(
                "chat.appendStream",
                lambda: self._quick.chat_appendStream(
                    channel=where["channel"],
                    ts=writing.ts,
                    markdown_text=shown[len(writing.shown) :],
                ),
            )
            if appended:
                writing.shown, writing.text = shown, text
            else:
                writing.broken = True

    async def _start(
        self, conversation: ConversationRef, where: dict[str, str], text: str
    ) -> _Writing | None:
        """A stream for the answer where the workspace streams (in a thread, for the person
        who asked); else the answer posted now, tagged as still being written."""
        channel, thread_ts = where["channel"], where.get("thread_ts")
        team = conversation.id.split(":")[1] if conversation.id.count(":") >= 2 else None
        user = conversation.data.get("user")
        # Outside a DM Slack streams only to a named recipient: the person who asked.
        if self._streams and thread_ts and (user or channel.startswith("D")):
            shown = markdown_text(text)
            try:
                started = await self.client.chat_startStream(
                    channel=channel,
                    thread_ts=thread_ts,
                    markdown_text=shown,
                    recipient_team_id=team if user else None,
                    recipient_user_id=user,
                )
                return _Writing(str(started["ts"]), streaming=True, shown=shown, text=text)
            except SlackApiError as exc:
                answer = exc.response
                error = str(answer.get("error", "?")) if hasattr(answer, "get") else "?"
                status = int(getattr(answer, "status_code", 0) or 0)
                if error in _TRANSIENT or status >= 500:
                    self._maybe_started(where, error)
                    return None
                if error in NO_STREAMING:
                    self._streams = False
                log.warning("chat.startStream failed (%s): the answer is edited instead", error)
            except (ClientError, TimeoutError) as exc:
                self._maybe_started(where, type(exc).__name__)
                return None
        fields = answer_message(text)
        fields.pop("instead")
        ts = await self._post(where, key=f"{OPEN}{uuid.uuid4().hex}", **fields)
        return _Writing(ts, False, markdown_text(text), text) if ts else None

    def _maybe_started(self, where: dict[str, str], error: str) -> None:
        """chat.startStream failed in a way Slack may have acted on: whatever comes next in
        the thread (more of the answer, the answer) first looks for the stream it left."""
        log.warning("chat.startStream failed (%s)", error)
        self._suspect.add(_place(where))

    async def _edit(self, where: dict[str, str], writing: _Writing, text: str) -> None:
        writing.at = time.monotonic()
        fields = answer_message(text)
        fields.pop("instead")
        if await self._once_quietly(
            "chat.update",
            lambda: self._quick.chat_update(channel=where["channel"], ts=writing.ts, **fields),
        ):
            writing.shown, writing.text = markdown_text(text), text

    async def _finish(
        self,
        where: dict[str, str],
        writing: _Writing,
        piece: str,
        key: str,
        below: list[dict[str, Any]],
    ) -> None:
        """The message being written ends as exactly `piece` with `below` under it, tagged
        `key` (a random tag when the answer has none): the stream stopped with the rest of
        the answer, or, when what it holds is not the answer's beginning (or was not
        streamed), stopped as it is and set to the answer by chat.update."""
        channel = where["channel"]
        metadata = {"event_type": POST_EVENT, "event_payload": {"post": key or uuid.uuid4().hex}}
        final = markdown_text(piece)
        if writing.streaming:
            rest = final[len(writing.shown) :] if final.startswith(writing.shown) else None
            whole = rest is not None and not writing.broken
            stopped = await self._try(
                "chat.stopStream",
                self.client.chat_stopStream(
                    channel=channel,
                    ts=writing.ts,
                    markdown_text=(rest or None) if whole else None,
                    blocks=(below or None) if whole else None,
                    metadata=metadata,
                ),
            )
            if whole and isinstance(stopped, AsyncSlackResponse):
                return
        fields = answer_message(piece)
        fields.pop("instead")
        await self._update(
            channel,
            writing.ts,
            metadata=metadata,
            **{"text": fields["text"], "blocks": [*fields["blocks"], *below]},
        )

    async def _left(self, where: dict[str, str]) -> _Writing | None:
        """An answer message a dead process left in the thread still being written (a
        stream never stopped, which alone of the bot's messages carries no metadata and no
        file, or a post tagged OPEN), stopped now so it can be edited; None when there is
        none."""
        me = await self._me()
        if me is None:
            return None

        def unfinished(message: Mapping[str, Any]) -> bool:
            if message.get("bot_id") != me or message.get("files"):
                return False
            tag = str(((message.get("metadata") or {}).get("event_payload") or {}).get("post", ""))
            return not message.get("metadata") or tag.startswith(OPEN)

        _, ts = await self._find_post(where["channel"], where.get("thread_ts"), unfinished)
        if ts is None:
            return None
        # A stream left open takes no edits until it is stopped (an error if it was not one).
        await self._once_quietly(
            "chat.stopStream", lambda: self._quick.chat_stopStream(channel=where["channel"], ts=ts)
        )
        return _Writing(ts, streaming=False)

    async def _tagged(self, where: dict[str, str], key: str) -> bool:
        """Whether the message tagged `key` is in the thread (a thread that cannot be read
        counts as without it, as `_once` counts it before a post `again`)."""

        def tagged(message: Mapping[str, Any]) -> bool:
            return bool(
                ((message.get("metadata") or {}).get("event_payload") or {}).get("post") == key
            )

        _, ts = await self._find_post(where["channel"], where.get("thread_ts"), tagged)
        return ts is not None

    async def _me(self) -> str | None:
        """The bot's id (auth.test, once), which its own messages in a thread carry."""
        if self._bot_id is None:
            response = await self._try("auth.test", self.client.auth_test())
            if isinstance(response, AsyncSlackResponse):
                self._bot_id = str(response.get("bot_id") or "") or None
        return self._bot_id

    async def _finished(self, where: dict[str, str], stop: StopReason) -> None:
        """The run stopped: an answer still being written (cancelled, stopped by an error)
        is finished as it is, and the thread's status cleared, unless it says the run waits
        for an approval (Slack clears it at the bot's next message in the thread)."""
        writing = self._writing.pop(_place(where), None)
        self._suspect.discard(_place(where))
        self._steps.pop(_place(where), None)
        if writing is not None and writing.streaming:
            await self._try(
                "chat.stopStream",
                self.client.chat_stopStream(
                    channel=where["channel"],
                    ts=writing.ts,
                    metadata={
                        "event_type": POST_EVENT,
                        "event_payload": {"post": uuid.uuid4().hex},
                    },
                ),
            )
        elif writing is not None:
            fields = answer_message(writing.text)
            fields.pop("instead")
            done = {"event_type": POST_EVENT, "event_payload": {"post": uuid.uuid4().hex}}
            await self._update(where["channel"], writing.ts, metadata=done, **fields)
        if stop != StopReason.APPROVAL_REQUIRED:
            await self._status(where, "")

    async def _status(self, where: dict[str, str], status: str) -> None:
        """The thread's assistant status ("" clears it); where Slack refuses it (not an
        assistant thread, an older workspace) this process does not ask again."""
        if not self._statuses or "thread_ts" not in where:
            return
        try:
            await self._quick.assistant_threads_setStatus(
                channel_id=where["channel"], thread_ts=where["thread_ts"], status=status
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error", "?")) if hasattr(exc.response, "get") else "?"
            if int(getattr(exc.response, "status_code", 0) or 0) == 429:
                return
            if error in NO_STREAMING:
                self._statuses = False
            log.warning("assistant.threads.setStatus failed: %s", error)
        except (ClientError, TimeoutError) as exc:
            log.warning("assistant.threads.setStatus failed: %s", type(exc).__name__)

    async def _once_quietly(
        self, method: str, call: Callable[[], Awaitable[AsyncSlackResponse]]
    ) -> bool:
        """One try of a call that a later one makes good (an append, an edit of an answer
        being written): a rate limit pauses such calls for what Slack says."""
        if time.monotonic() < self._quick_paused_until:
            return False
        try:
            await call()
            return True
        except SlackApiError as exc:
            answer = exc.response
            if int(getattr(answer, "status_code", 0) or 0) == 429:
                sent = getattr(answer, "headers", None) or {}
                headers = {str(k).lower(): v for k, v in sent.items()}
                try:
                    pause = float(headers.get("retry-after", CALM_DOWN))
                except (TypeError, ValueError):
                    pause = CALM_DOWN
                self._quick_paused_until = time.monotonic() + max(pause, 1.0)
            error = answer.get("error", "?") if hasattr(answer, "get") else "?"
            log.warning("%s failed: %s", method, error)
        except (ClientError, TimeoutError) as exc:
            log.warning("%s failed: %s", method, type(exc).__name__)
        return False

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
