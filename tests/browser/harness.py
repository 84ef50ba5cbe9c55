"""The whole service for a browser test: a fake Slack, the service with its in-process worker
and the offline demo model (`run: <command>` runs bash) served on a free port, a real Redis.

`serving` starts it; the `Harness` it yields sends Slack messages the way Slack does (signed
Events API requests) and reads what the bot sent back to the fake Slack.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.settings import Settings
from tests.conftest import free_port
from tests.fake_slack import (
    Call,
    FakeSlack,
    event_body,
    mention_event,
    message_event,
    next_ts,
    post_signed,
)
from tests.serving import Served, running

SECRET = "browser-test-signing-secret"
CHANNEL = "C111"
ADMIN = "U_ADMIN"
APPROVER = "U_CAROL"
ALICE = "U_ALICE"  # neither admin nor approver
REPLIES = ("chat.postMessage", "chat.update", "chat.postEphemeral")


@dataclass
class Harness(Served[FakeSlack]):
    public_url: str
    """What the service was given as CLAWGATE_PUBLIC_URL (by default its own address)."""

    def url(self, path: str = "/") -> str:
        """The server's address of `path`, e.g. `url("/console/")` for `page.goto`."""
        return str(self.server.make_url(path))

    async def post_slack_message(
        self,
        text: str,
        *,
        user: str = ALICE,
        channel: str = CHANNEL,
        thread_ts: str | None = None,
        mention: bool = True,
    ) -> str:
        """`user` writes `text` in `channel` (in the thread `thread_ts`, else at the top),
        mentioning the bot unless `mention` is false; Slack delivers it, signed. Returns the
        message's ts: a top-level message's is the thread the bot answers in."""
        ts = next_ts()
        make = mention_event if mention else message_event
        event = make(text, user=user, channel=channel, ts=ts, thread_ts=thread_ts)
        status, body = await post_signed(self.url("/slack/events"), SECRET, event_body(event))
        assert status == 200, body
        return ts

    def posted(
        self, *methods: str, channel: str | None = None, thread_ts: str | None = None
    ) -> list[Call]:
        """What the bot sent the fake Slack, oldest first: the successful calls of `methods`
        (default chat.postMessage, chat.update and chat.postEphemeral), only those in
        `channel` and the thread `thread_ts` when given (an update is in its message's)."""
        wanted = methods or REPLIES
        return [
            call
            for call in self.fake.calls()
            if call.ok
            and call.method in wanted
            and channel in (None, call.params.get("channel"))
            and thread_ts in (None, self._thread_of(call))
        ]

    async def await_posted(
        self,
        predicate: Callable[[Call], bool],
        what: str,
        *methods: str,
        channel: str | None = None,
        thread_ts: str | None = None,
        timeout: float = 10.0,
    ) -> Call:
        """The first of `posted(...)` that `predicate` holds for, once there is one (a
        timeout names `what` and lists what the fake saw)."""

        def found() -> Call | None:
            calls = self.posted(*methods, channel=channel, thread_ts=thread_ts)
            return next((call for call in calls if predicate(call)), None)

        return await self.fake.await_for(found, timeout, what=what)

    def _thread_of(self, call: Call) -> str | None:
        if call.method != "chat.update":
            thread_ts = call.params.get("thread_ts")
            return None if thread_ts is None else str(thread_ts)
        updated = self.fake.message(str(call.params.get("channel")), str(call.params.get("ts")))
        return None if updated is None else updated.thread_ts


@contextlib.asynccontextmanager
async def serving(
    redis_url: str,
    workdir: Path,
    *,
    public_url: str | None = None,
    start_worker: bool = True,
    **overrides: str,
) -> AsyncIterator[Harness]:
    """The service for Slack (admin `ADMIN`, approver `APPROVER`) with its worker, on a free
    port. CLAWGATE_PUBLIC_URL is `public_url`, by default the server's own address; any
    other setting is in `overrides`, by its environment name."""
    port = free_port()
    public_url = public_url or f"http://127.0.0.1:{port}"
    prefix = f"cgbrowser{uuid.uuid4().hex[:10]}"
    async with FakeSlack() as fake:
        values: dict[str, Any] = {
            "REDIS_URL": redis_url,
            "CLAWGATE_REDIS_PREFIX": prefix,
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": fake.base_url,
            "CLAWGATE_WORKDIR": str(workdir),
            "CLAWGATE_ADMINS": f"slack:{ADMIN}",
            "CLAWGATE_APPROVERS": f"slack:{APPROVER}",
            "CLAWGATE_PUBLIC_URL": public_url,
            **overrides,
        }
        settings = Settings(**values)
        worker = settings.worker_topology != "none"  # a child worker: here, in process
        async with running(settings, worker=worker, start_worker=start_worker, port=port) as (
            service,
            server,
        ):
            yield Harness(fake, service, server, workdir, prefix, settings, public_url)
