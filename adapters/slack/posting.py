"""Slack posts made at most once, through failures after which Slack may have posted anyway
(5xx, a dropped connection): every post carries a tag in its metadata, and before posting
again the thread is searched for it. Updates, safe to repeat, are simply retried. Failures
are logged, never raised into the run: its state is in Redis, and `/pending` still shows a
notice that could not be posted."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from runtime.channel import MessageRef

log = logging.getLogger(__name__)

# Errors that may pass (Slack may or may not have acted): updates are simply repeated, posts
# only after checking they did not land.
TRANSIENT = {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
ATTEMPTS = 3
POST_EVENT = "clawgate_post"  # metadata event type tagging clawgate's posts
SEARCH_PAGES = 20  # pages of a thread read looking for a post that may have landed

Landed = Callable[[Mapping[str, Any]], bool]  # recognizes a message in the thread


def tag(key: str) -> dict[str, Any]:
    """The metadata tagging a post `key`."""
    return {"event_type": POST_EVENT, "event_payload": {"post": key}}


def tag_of(message: Mapping[str, Any]) -> object:
    """The tag a message carries (None when it carries none)."""
    return ((message.get("metadata") or {}).get("event_payload") or {}).get("post")


def tagged(key: str) -> Landed:
    return lambda message: tag_of(message) == key


def slack_error(exc: SlackApiError) -> tuple[str, int]:
    """(Slack's error code, the HTTP status) of a refused call. slack_sdk may attach the raw
    HTTP response when Slack's body was not JSON: then "?"."""
    answer = exc.response
    error = str(answer.get("error", "unknown error")) if hasattr(answer, "get") else "?"
    return error, int(getattr(answer, "status_code", getattr(answer, "status", 0)) or 0)


class Poster:
    """The Web API calls of a SlackChannel that post, update and search a conversation."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def post(
        self,
        where: dict[str, str],
        key: str = "",
        again: bool = False,
        instead: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> str | None:
        """Post once, tagged `key` (else a random tag); the ts of the post, None when it
        failed. `again`: the post may be there from before a crash: searched for first.
        `instead`: the fields to post if Slack refuses these (an error after which it did not
        post, such as `invalid_blocks`), under the same tag."""
        key = key or uuid.uuid4().hex
        channel, thread_ts = where["channel"], where.get("thread_ts")

        def post(fields: Mapping[str, Any]) -> Awaitable[AsyncSlackResponse]:
            return self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, metadata=tag(key), **fields
            )

        done = await self._once(
            where,
            "chat.postMessage",
            lambda: post(fields),
            tagged(key),
            again,
            instead=None if instead is None else lambda: post(instead),
        )
        return done if done is None or isinstance(done, str) else str(done["ts"])

    async def upload(
        self, where: dict[str, str], name: str, data: bytes, title: str, again: bool
    ) -> MessageRef | None:
        """Share `data` as the file `name` in the conversation (its thread), through
        files.getUploadURLExternal, the upload and files.completeUploadExternal (slack_sdk's
        files_upload_v2). Once: a file share carries no metadata, so after a failure Slack
        may have acted on, or with `again` (a retake), the thread is searched first for a
        file of the same name, title and size. None when it could not be shared (logged)."""
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

    async def is_posted(self, where: dict[str, str], key: str) -> bool:
        """Whether the post tagged `key` is in the thread (a thread that cannot be read
        counts as without it, as a post `again` counts it)."""
        _, ts = await self.find(where["channel"], where.get("thread_ts"), tagged(key))
        return ts is not None

    async def _once(
        self,
        where: dict[str, str],
        method: str,
        call: Callable[[], Awaitable[AsyncSlackResponse]],
        landed: Landed,
        again: bool,
        instead: Callable[[], Awaitable[AsyncSlackResponse]] | None = None,
    ) -> AsyncSlackResponse | str | None:
        """Make `call` (a post) at most once in effect: the response, the ts of the message
        `landed` recognizes in the conversation (found before posting when `again`, or
        after a failure Slack may have acted on), or None when it failed. A call Slack
        refuses is made `instead`, when given."""
        channel, thread_ts = where["channel"], where.get("thread_ts")
        if again:
            checked, ts = await self.find(channel, thread_ts, landed)
            if ts is not None:
                return ts
        for attempt in range(1, ATTEMPTS + 1):
            response = await self.attempt(method, call())
            if isinstance(response, AsyncSlackResponse):
                return response
            if response == "fail":
                if instead is None:
                    return None
                return await self._once(where, method, instead, landed, again=False)
            await asyncio.sleep(0.5 * attempt)  # let a post Slack did store show up first
            checked, ts = await self.find(channel, thread_ts, landed)
            if ts is not None or not checked:  # it landed, or we cannot tell: never twice
                return ts
        log.error("%s gave up after %d attempts", method, ATTEMPTS)
        return None

    async def find(
        self, channel: str, thread_ts: str | None, landed: Landed
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

    async def update(self, channel: str, ts: str, **fields: Any) -> None:
        """Updates are safe to repeat, so any failure that may pass is retried."""
        for attempt in range(1, ATTEMPTS + 1):
            update = self.client.chat_update(channel=channel, ts=ts, **fields)
            if await self.attempt("chat.update", update) != "retry":
                return
            await asyncio.sleep(0.2 * attempt)
        log.error("chat.update gave up after %d attempts", ATTEMPTS)

    async def attempt(
        self, method: str, call: Awaitable[AsyncSlackResponse]
    ) -> AsyncSlackResponse | Literal["retry", "fail"]:
        """The response, or whether the failure may pass ("retry") or not ("fail"); logged."""
        try:
            return await call
        except SlackApiError as exc:
            error, status = slack_error(exc)
            if error not in TRANSIENT and status < 500:
                log.error("%s failed: %s", method, error)
                return "fail"
            log.warning("%s failed: %s", method, error)
        except (ClientError, TimeoutError, SlackRequestError) as exc:
            # SlackRequestError: files_upload_v2's upload step failed; nothing was shared.
            log.warning("%s failed: %s", method, type(exc).__name__)
        return "retry"
