"""The answer being written, live in one message of the thread: streamed as the model writes
it (chat.startStream/appendStream/stopStream), or, where the workspace refuses streaming,
posted early and edited as it grows; the run's tool steps as the thread's assistant status
and listed under the final answer; and a message a dead process left half-written taken
over, so a retake finishes it instead of posting a second one."""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from adapters.slack.answers import answer_message, feedback_blocks, markdown_text, steps_blocks
from adapters.slack.posting import TRANSIENT, Poster, slack_error, tag, tag_of
from adapters.slack.quick import QuickCalls
from adapters.slack.text import escape
from runtime.channel import RunFinished, ToolFinished, ToolStarted, Writing
from runtime.models import ConversationRef, StopReason, ToolStatus
from runtime.tools.clarify import ClarifyTool

log = logging.getLogger(__name__)

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


class LiveAnswers:
    """The answer being written in each thread, and the tool steps of its run."""

    def __init__(self, posts: Poster, bot_id: str = "") -> None:
        """`bot_id`: the bot's, which its messages carry (asked of auth.test when needed, if
        not given)."""
        self._posts = posts
        self._writing: dict[tuple[str, str], _Writing] = {}  # (channel, thread) -> its answer
        # The tool calls of a thread's run so far, one line each: listed under its answer.
        self._steps: dict[tuple[str, str], list[str]] = {}
        # Threads where a process may have died writing an answer (a retake says so with a
        # Notice first): the next answer there looks for the message it left.
        self._suspect: set[tuple[str, str]] = set()
        self._streams = True  # False once the workspace refused chat.startStream
        self._statuses = True  # False once it refused assistant.threads.setStatus
        # Threads whose assistant status this process set and has not cleared: only those
        # are cleared when a run ends (a plain answer sets none, so costs no call).
        self._status_set: set[tuple[str, str]] = set()
        self._bot_id: str | None = bot_id or None
        self._quick = QuickCalls(posts.client)

    def suspect(self, where: dict[str, str]) -> None:
        """A retake's notice came: a dead process may have left an answer there half-written."""
        self._suspect.add(_place(where))

    async def progress(
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
                await self._status(where, ASKING if event.tool == ClarifyTool.name else WAITING)
        else:
            await self._finished(where, event.stop_reason)

    async def answer(self, where: dict[str, str], piece: str, key: str, again: bool) -> None:
        """The answer's first message, exactly `piece`: the one streamed (or edited) while
        the model wrote it, else posted now, tagged `key`/0. A final answer (with a `key`)
        lists the run's steps under it and feedback buttons. `again` (a retake): the message
        may be there, finished (then left as it is) or left half-written by a dead process
        (then finished)."""
        first = f"{key}/0" if key else ""
        below = []
        if key:  # the final answer: what the run did, and how the answer was
            below = [*steps_blocks(self._steps.pop(_place(where), [])), *feedback_blocks(key)]
        writing = self._writing.pop(_place(where), None)
        if writing is None and (again or _place(where) in self._suspect):
            if first and await self._posts.is_posted(where, first):
                return  # there, finished: only what follows it may be missing
            writing = await self._left(where)
        if writing is not None:
            await self._finish(where, writing, piece, first, below)
        elif piece:
            fields = answer_message(piece)
            fields["blocks"] = [*fields["blocks"], *below]
            await self._posts.post(where, key=first, again=again, **fields)

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
            refused = await self._quick.once(
                "chat.appendStream",
                lambda: self._quick.client.chat_appendStream(
                    channel=where["channel"],
                    ts=writing.ts,
                    markdown_text=shown[len(writing.shown) :],
                ),
            )
            if refused is None:
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
                started = await self._posts.client.chat_startStream(
                    channel=channel,
                    thread_ts=thread_ts,
                    markdown_text=shown,
                    recipient_team_id=team if user else None,
                    recipient_user_id=user,
                )
                return _Writing(str(started["ts"]), streaming=True, shown=shown, text=text)
            except SlackApiError as exc:
                error, status = slack_error(exc)
                if error in TRANSIENT or status >= 500:
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
        ts = await self._posts.post(where, key=f"{OPEN}{uuid.uuid4().hex}", **fields)
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
        refused = await self._quick.once(
            "chat.update",
            lambda: self._quick.client.chat_update(
                channel=where["channel"], ts=writing.ts, **fields
            ),
        )
        if refused is None:
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
        metadata = tag(key or uuid.uuid4().hex)
        final = markdown_text(piece)
        if writing.streaming:
            rest = final[len(writing.shown) :] if final.startswith(writing.shown) else None
            whole = rest is not None and not writing.broken
            stopped = await self._posts.attempt(
                "chat.stopStream",
                self._posts.client.chat_stopStream(
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
        await self._posts.update(
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
            return not message.get("metadata") or str(tag_of(message)).startswith(OPEN)

        _, ts = await self._posts.find(where["channel"], where.get("thread_ts"), unfinished)
        if ts is None:
            return None
        # A stream left open takes no edits until it is stopped (an error if it was not one).
        await self._quick.once(
            "chat.stopStream",
            lambda: self._quick.client.chat_stopStream(channel=where["channel"], ts=ts),
        )
        return _Writing(ts, streaming=False)

    async def _me(self) -> str | None:
        """The bot's id (auth.test, once), which its own messages in a thread carry."""
        if self._bot_id is None:
            response = await self._posts.attempt("auth.test", self._posts.client.auth_test())
            if isinstance(response, AsyncSlackResponse):
                self._bot_id = str(response.get("bot_id") or "") or None
        return self._bot_id

    async def _finished(self, where: dict[str, str], stop: StopReason) -> None:
        """The run stopped: an answer still being written (cancelled, stopped by an error)
        is finished as it is, and the status this process set in the thread cleared, unless
        it says the run waits for an approval (Slack clears it at the bot's next message in
        the thread)."""
        writing = self._writing.pop(_place(where), None)
        self._suspect.discard(_place(where))
        self._steps.pop(_place(where), None)
        if writing is not None and writing.streaming:
            await self._posts.attempt(
                "chat.stopStream",
                self._posts.client.chat_stopStream(
                    channel=where["channel"], ts=writing.ts, metadata=tag(uuid.uuid4().hex)
                ),
            )
        elif writing is not None:
            fields = answer_message(writing.text)
            fields.pop("instead")
            done = tag(uuid.uuid4().hex)
            await self._posts.update(where["channel"], writing.ts, metadata=done, **fields)
        if stop != StopReason.APPROVAL_REQUIRED and _place(where) in self._status_set:
            await self._status(where, "")

    async def _status(self, where: dict[str, str], status: str) -> None:
        """The thread's assistant status ("" clears it), tried once; where Slack refuses it
        (not an assistant thread, an older workspace) this process does not ask again."""
        if not self._statuses or "thread_ts" not in where:
            return
        if status:
            self._status_set.add(_place(where))
        else:
            self._status_set.discard(_place(where))
        refused = await self._quick.once(
            "assistant.threads.setStatus",
            lambda: self._quick.client.assistant_threads_setStatus(
                channel_id=where["channel"], thread_ts=where["thread_ts"], status=status
            ),
        )
        if refused in NO_STREAMING:
            self._statuses = False
