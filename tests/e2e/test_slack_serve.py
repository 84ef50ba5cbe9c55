"""`clawgate serve` for Slack, end to end: the real aiohttp server, slack-bolt and slack_sdk
against FakeSlack, a real Redis, inbound requests signed the way Slack signs them, the
in-process worker. Every test checks what a user would notice: what was posted where, what
ran in the workdir, what was refused, and what is queued in Redis."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import itertools
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.slack.answers import FEEDBACK
from adapters.slack.inbound import (
    APPROVE_ALWAYS,
    APPROVE_ONCE,
    EDIT,
    EDIT_VIEW,
    REJECT,
    REJECT_VIEW,
)
from bot.cli_approvals import run_approvals_command
from bot.policy_file import load_policy_file
from bot.server import build_service
from bot.settings import Settings
from runtime.audit import AuditLog
from runtime.store.keys import Keys
from tests.conftest import free_port
from tests.fake_openai import FakeOpenAI, calls, reply, streamed
from tests.fake_slack import (
    BOT_ID,
    BOT_USER_ID,
    TEAM_ID,
    Call,
    FakeSlack,
    assistant_thread_event,
    block_action_body,
    command_body,
    event_body,
    mention_event,
    message_event,
    new_event_id,
    next_ts,
    post_signed,
    view_submission_body,
)
from tests.serving import (
    Served,
    assert_settings_errors,
    load_settings_in,
    own_redis,
    run_serve,
    running,
)

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

SECRET = "test-signing-secret"
CHANNEL = "C111"
ADMIN = "U_ADMIN"
APPROVER = "U_CAROL"
ALICE = "U_ALICE"  # the requester in these tests; may not approve her own calls
BOB = "U_BOB"  # neither admin nor approver
NOTES = "Quarterly notes: the fox jumped over the lazy dog.\n"


# ---------------------------------------------------------------------------------------------
# The harness: one service (runtime + worker + Slack adapter) behind a real HTTP server
# ---------------------------------------------------------------------------------------------


@dataclass
class Harness(Served[FakeSlack]):
    @property
    def url(self) -> str:
        return str(self.server.make_url("/slack/events"))

    async def post(
        self,
        body: str,
        *,
        secret: str = SECRET,
        timestamp: int | None = None,
        retry_num: int | None = None,
    ) -> tuple[int, str]:
        return await post_signed(self.url, secret, body, timestamp=timestamp, retry_num=retry_num)

    # --- what is in Redis ----------------------------------------------------------------

    async def approval_status(self, session: str, approval_id: str) -> str | None:
        key = f"{self.prefix}:{{{session}}}:approval:{approval_id}"
        value = await self.redis.hget(key, "status")
        return None if value is None else str(value)

    # --- what was posted -----------------------------------------------------------------

    def texts(self, channel: str = CHANNEL, thread_ts: str | None = None) -> list[str]:
        """What the bot posted (as posted) and streamed (as it ended)."""
        return self.fake.said(channel, thread_ts)

    async def await_said(self, text: str, channel: str = CHANNEL) -> None:
        """Until the bot said `text` (posted it, or ended a streamed answer as it)."""
        await self.fake.await_for(lambda: text in self.texts(channel), 15, what=repr(text))

    async def await_post(
        self, predicate: Callable[[Call], bool], what: str, channel: str = CHANNEL
    ) -> Call:
        def found() -> Call | None:
            return next((c for c in self.fake.posts(channel) if predicate(c)), None)

        return await self.fake.await_for(found, 15, what=what)


def session_of(thread_ts: str, channel: str = CHANNEL) -> str:
    return f"slack:{TEAM_ID}:{channel}:{thread_ts}"


@contextlib.asynccontextmanager
async def serving(
    fake: FakeSlack,
    workdir: Path,
    redis_url: str,
    *,
    start_worker: bool = True,
    **overrides: str,
) -> AsyncIterator[Harness]:
    prefix = f"cgslack{uuid.uuid4().hex[:10]}"
    values: dict[str, Any] = {
        "REDIS_URL": redis_url,
        "CLAWGATE_REDIS_PREFIX": prefix,
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": fake.base_url,
        "CLAWGATE_WORKDIR": str(workdir),
        "CLAWGATE_ADMINS": f"slack:{ADMIN}",
        "CLAWGATE_APPROVERS": f"slack:{APPROVER}",
        "CLAWGATE_BASH_TIMEOUT": "20",
        **overrides,
    }
    settings = Settings(**values)
    worker = settings.worker_topology != "none"  # a child worker: here, in process
    async with running(settings, worker=worker, start_worker=start_worker) as (service, server):
        yield Harness(fake, service, server, workdir, prefix, settings)


@pytest.fixture
async def h(fake: FakeSlack, workdir: Path, redis_url: str) -> AsyncIterator[Harness]:
    (workdir / "notes.txt").write_text(NOTES)
    async with serving(fake, workdir, redis_url) as harness:
        yield harness


def blocks_of(call: Call) -> list[dict[str, Any]]:
    blocks = call.params.get("blocks")
    assert isinstance(blocks, list), call.params
    return blocks


def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in blocks if b.get("type") == "actions" for e in b["elements"]]


def block_text(blocks: list[dict[str, Any]] | None) -> str:
    parts = []
    for block in blocks or []:
        if isinstance(block.get("text"), str):  # an answer's markdown block
            parts.append(block["text"])
        elif "text" in block:
            parts.append(str(block["text"].get("text", "")))
        for element in block.get("elements", []):
            if isinstance(element.get("text"), str):
                parts.append(element["text"])
    return "\n".join(parts)


@dataclass
class Pending:
    thread_ts: str
    notice: Call
    approval_id: str

    @property
    def notice_ts(self) -> str:
        return str(self.notice.response["ts"])

    @property
    def session(self) -> str:
        return session_of(self.thread_ts)


async def request_risky(h: Harness, slack_text: str, user: str = ALICE) -> Pending:
    """Mention the bot with a risky request; wait for the approval notice in its thread."""
    ts = next_ts()
    status, _ = await h.post(event_body(mention_event(slack_text, user=user, ts=ts)))
    assert status == 200
    notice = await h.await_post(
        lambda c: c.params.get("thread_ts") == ts and c.is_notice,
        "the approval notice",
    )
    (button, *_) = buttons(blocks_of(notice))
    return Pending(ts, notice, str(button["value"]))


async def click(
    h: Harness, pending: Pending, action_id: str, user: str, trigger_id: str | None = None
) -> tuple[int, str]:
    body = block_action_body(
        action_id,
        pending.approval_id,
        user=user,
        message_ts=pending.notice_ts,
        thread_ts=pending.thread_ts,
        message_blocks=blocks_of(pending.notice),
        trigger_id=trigger_id,
    )
    return await h.post(body)


def edit_value(pending: Pending, command: str) -> str:
    """The Edit button's value: the approval id, then the arguments to prefill."""
    return f'{pending.approval_id}\n{{\n  "command": {json.dumps(command)}\n}}'


async def eventually(check: Callable[[], Awaitable[bool]], h: Harness, what: str) -> None:
    await h.fake.await_for(check, 15, what=what)


# ---------------------------------------------------------------------------------------------
# 1. A mention is answered in its thread
# ---------------------------------------------------------------------------------------------


async def test_mention_is_answered_in_its_thread(h: Harness) -> None:
    ts = next_ts()
    status, _ = await h.post(event_body(mention_event("read notes.txt", ts=ts)))
    assert status == 200

    answer = await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
    assert answer.params["channel"] == CHANNEL and answer.params["thread_ts"] == ts
    await h.drained()

    assert all(c.params.get("thread_ts") == ts for c in h.fake.posts())  # nothing elsewhere
    # One message: the answer, no "Working…" above it; the tool shown as the thread's status
    # while it ran, cleared at the end; under the answer what ran, and 👍/👎.
    said = [m for m in h.fake.bot_messages(CHANNEL, ts) if "demo model" not in str(m.text)]
    assert [m.ts for m in said] == [answer.response["ts"]], h.fake.describe()
    assert h.fake.statuses(CHANNEL, ts) == ["Running read…", ""]
    assert [b["type"] for b in blocks_of(answer)] == ["markdown", "context", "context_actions"]
    (steps,) = blocks_of(answer)[1]["elements"]
    assert steps["text"].startswith(":white_check_mark: `read` ") and "1 line" in steps["text"]
    assert await h.history_length(session_of(ts)) > 0


async def test_the_assistant_view_suggests_prompts_names_the_thread_and_keeps_its_session(
    h: Harness,
) -> None:
    """The assistant view: a thread opened in the DM gets the suggested prompts, its first
    message becomes its title, and it is a session of its own (the DM's other threads are
    others); a context change is acknowledged and changes nothing."""
    dm, thread = "D_ALICE", next_ts()
    assert (await h.post(event_body(assistant_thread_event(dm, thread))))[0] == 200
    (prompts,) = await h.fake.await_for(
        lambda: h.fake.calls("assistant.threads.setSuggestedPrompts"), 15, what="the prompts"
    )
    assert prompts.params["channel_id"] == dm and prompts.params["thread_ts"] == thread
    assert len(prompts.params["prompts"]) == 3
    assert prompts.params["prompts"][0]["title"] == "What can you do?"
    changed = assistant_thread_event(dm, thread, kind="assistant_thread_context_changed")
    assert (await h.post(event_body(changed)))[0] == 200

    asked = message_event("read   notes.txt", channel=dm, thread_ts=thread, channel_type="im")
    assert (await h.post(event_body(asked)))[0] == 200
    await h.fake.await_for(lambda: any("lazy dog" in t for t in h.texts(dm)), 15, what="answer")
    (title,) = h.fake.calls("assistant.threads.setTitle")
    assert title.params == {"channel_id": dm, "thread_ts": thread, "title": "read notes.txt"}
    second = message_event("thanks", channel=dm, thread_ts=thread, channel_type="im")
    assert (await h.post(event_body(second)))[0] == 200
    await h.drained()
    assert len(h.fake.calls("assistant.threads.setTitle")) == 1  # only the first names it
    assert await h.history_length(session_of(thread, channel=dm)) >= 4
    assert h.fake.statuses(dm, thread)[0] == "Running read…"


async def test_feedback_on_an_answer_is_audited_and_thanked(h: Harness) -> None:
    ts = next_ts()
    assert (await h.post(event_body(mention_event("read notes.txt", ts=ts))))[0] == 200
    answer = await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
    (feedback,) = blocks_of(answer)[-1]["elements"]
    assert feedback["type"] == "feedback_buttons" and feedback["action_id"] == FEEDBACK
    bad = feedback["negative_button"]["value"]
    assert bad == f"bad answer/{session_of(ts)}/{bad.rsplit('/', 1)[1]}"
    url = h.fake.new_response_url()
    _, before = await h.get("/metrics")
    body = block_action_body(
        FEEDBACK,
        bad,
        user=BOB,
        message_ts=str(answer.response["ts"]),
        thread_ts=ts,
        action_type="feedback_buttons",
        response_url=url,
    )
    assert (await h.post(body))[0] == 200
    (thanks,) = await h.fake.await_for(lambda: h.fake.responses(url), 15, what="the thanks")
    assert thanks.body["text"] == "Thanks for the feedback."
    assert thanks.body["response_type"] == "ephemeral"
    entries = await AuditLog(h.redis, Keys(h.prefix)).newest(20)
    (entry,) = [e for e in entries if e.event == "feedback"]
    assert entry.actor == f"slack:{BOB}"
    assert entry.fields["value"] == "bad" and entry.fields["answer"] == bad.split(" ", 1)[1]
    assert entry.fields["message"] == answer.response["ts"]
    assert entry.fields["model"] == "demo"
    _, after = await h.get("/metrics")
    counted = "clawgate_feedback_total", {"model": "demo", "value": "bad"}
    assert sample(after, counted[0], **counted[1]) == sample(before, counted[0], **counted[1]) + 1


# ---------------------------------------------------------------------------------------------
# 2-5. Human approval through Block Kit buttons, slash commands and the reject modal
# ---------------------------------------------------------------------------------------------


async def test_risky_call_waits_for_approve_button_then_runs_once(h: Harness) -> None:
    # Slack escapes > as &gt;: the model must still see a redirection (a risky write).
    pending = await request_risky(h, "run: echo ran &gt;&gt; log.txt")
    log = h.workdir / "log.txt"

    notice = pending.notice
    assert notice.params["channel"] == CHANNEL and notice.params["thread_ts"] == pending.thread_ts
    assert [b["action_id"] for b in buttons(blocks_of(notice))] == [
        APPROVE_ONCE,
        APPROVE_ALWAYS,
        EDIT,
        REJECT,
    ]
    values = [b["value"] for b in buttons(blocks_of(notice))]
    assert values == [pending.approval_id] * 2 + [edit_value(pending, "echo ran >> log.txt")] + [
        pending.approval_id
    ]
    details = block_text(blocks_of(notice))
    assert pending.approval_id in details and "log.txt" in details and "redirection" in details
    await h.drained()
    assert not log.exists()  # nothing ran while waiting
    assert await h.approval_status(pending.session, pending.approval_id) == "pending"

    status, _ = await click(h, pending, APPROVE_ONCE, APPROVER)
    assert status == 200
    await h.await_post(
        lambda c: (
            c.params.get("thread_ts") == pending.thread_ts
            and str(c.params.get("text")) == "[exit code 0]"
        ),
        "the answer after the approval",
    )
    await h.drained()

    assert log.read_text() == "ran\n"  # ran exactly once
    # In the thread: the notice and the one answer; the status said the run waited, and
    # was cleared once it ended.
    said = [m for m in h.fake.bot_messages(CHANNEL, pending.thread_ts) if "demo" not in str(m.text)]
    assert [m.ts for m in said] == [pending.notice_ts, said[-1].ts] and len(said) == 2
    statuses = h.fake.statuses(CHANNEL, pending.thread_ts)
    assert "Waiting for approval from an approver…" in statuses and statuses[-1] == ""
    updated = h.fake.message(CHANNEL, pending.notice_ts)
    assert updated is not None and updated.edits >= 1
    assert buttons(updated.blocks or []) == []
    assert f"Approved by <@{APPROVER}>" in block_text(updated.blocks)
    assert await h.approval_status(pending.session, pending.approval_id) == "consumed"

    # A second click on the stale button is refused and runs nothing.
    status, _ = await click(h, pending, APPROVE_ONCE, ADMIN)
    assert status == 200
    refusal = await h.fake.await_for(
        lambda: h.fake.ephemerals(CHANNEL, ADMIN), 15, what="the refusal"
    )
    assert "already decided" in refusal[0].params["text"]
    await h.drained()
    assert log.read_text() == "ran\n"


async def test_button_of_someone_who_may_not_approve_is_refused(h: Harness) -> None:
    victim = h.workdir / "victim.txt"
    victim.write_text("precious")
    pending = await request_risky(h, "run: rm -f victim.txt")
    await h.drained()
    posts_before = len(h.fake.posts())

    for user in (BOB, ALICE):  # a bystander, and the requester herself
        status, _ = await click(h, pending, APPROVE_ONCE, user)
        assert status == 200
        told = await h.fake.await_for(
            functools.partial(h.fake.ephemerals, CHANNEL, user), 15, what=f"refusal to {user}"
        )
        assert len(told) == 1
        assert told[0].params["thread_ts"] == pending.thread_ts
        assert f"You cannot decide approval {pending.approval_id}" in told[0].params["text"]
        await h.drained()

    assert victim.read_text() == "precious"
    assert h.fake.updates(CHANNEL, pending.notice_ts) == []  # the notice still has its buttons
    assert len(h.fake.posts()) == posts_before
    assert await h.approval_status(pending.session, pending.approval_id) == "pending"
    assert len(h.fake.ephemerals()) == 2  # only the two people who clicked were told

    # Anyone may still see what waits, privately.
    url = h.fake.new_response_url()
    status, _ = await h.post(command_body("/clawgate", "pending", user_id=BOB, response_url=url))
    assert status == 200
    (listed,) = await h.fake.await_for(lambda: h.fake.responses(url), 15, what="/pending")
    assert pending.approval_id in listed.body["text"] and "rm -f victim.txt" in listed.body["text"]
    assert listed.body.get("response_type") == "ephemeral"


async def test_mode_slash_command_switches_the_channel_for_everyone_in_it(h: Harness) -> None:
    url = h.fake.new_response_url()
    status, _ = await h.post(command_body("/mode", "plan", user_id=BOB, response_url=url))
    assert status == 200
    switched = f"Mode: plan, set by <@{BOB}> (was auto)"
    said = lambda: any(switched in text for text in h.texts(CHANNEL))  # noqa: E731
    await h.fake.await_for(said, 15, what="the switch, in the channel (not ephemeral)")
    ts = next_ts()
    await h.post(event_body(mention_event("write planted.txt: x", ts=ts)))
    offered = "(enabled: read, clarify)"  # the demo model says what it was offered
    await h.fake.await_for(lambda: offered in " ".join(h.texts(CHANNEL, ts)), 15, what="no write")
    assert not (h.workdir / "planted.txt").exists()
    shown = h.fake.new_response_url()
    await h.post(command_body("/mode", "", user_id=ADMIN, response_url=shown))
    (mode,) = await h.fake.await_for(lambda: h.fake.responses(shown), 15, what="/mode")
    assert mode.body["text"].startswith(f"Mode here: plan (set by <@{BOB}>")
    assert mode.body.get("response_type") == "ephemeral"


async def test_typed_approve_of_a_consumed_id_is_refused(h: Harness) -> None:
    pending = await request_risky(h, "run: echo once &gt;&gt; log.txt")
    log = h.workdir / "log.txt"
    first = h.fake.new_response_url()
    status, _ = await h.post(
        command_body("/approve", pending.approval_id, user_id=ADMIN, response_url=first)
    )
    assert status == 200
    await h.await_post(
        lambda c: (
            c.params.get("thread_ts") == pending.thread_ts
            and str(c.params.get("text")) == "[exit code 0]"
        ),
        "the answer after /approve",
    )
    await h.drained()
    assert log.read_text() == "once\n"
    # Whoever typed it is told it took (the notice shows it to everyone).
    (told,) = h.fake.responses(first)
    assert told.body == {
        "text": f"Approved bash ({pending.approval_id}).",
        "response_type": "ephemeral",
    }
    updated = h.fake.message(CHANNEL, pending.notice_ts)
    assert updated is not None and f"Approved by <@{ADMIN}>" in block_text(updated.blocks)

    again = h.fake.new_response_url()
    status, _ = await h.post(
        command_body("/approve", pending.approval_id, user_id=APPROVER, response_url=again)
    )
    assert status == 200
    (response,) = await h.fake.await_for(lambda: h.fake.responses(again), 15, what="a reply")
    text = response.body["text"]
    assert f"approval {pending.approval_id} was already decided by <@{ADMIN}>" in text
    assert response.body.get("response_type") == "ephemeral"
    await h.drained()
    assert log.read_text() == "once\n"
    assert h.fake.ephemerals() == []  # answered through the response_url only
    assert await h.approval_status(pending.session, pending.approval_id) == "consumed"


async def test_reject_button_opens_a_modal_and_the_reason_reaches_the_model(
    h: Harness,
) -> None:
    victim = h.workdir / "victim.txt"
    victim.write_text("precious")
    pending = await request_risky(h, "run: rm -f victim.txt")
    trigger = f"{uuid.uuid4().int % 10**9}.1.{uuid.uuid4().hex}"

    status, _ = await click(h, pending, REJECT, ADMIN, trigger_id=trigger)
    assert status == 200
    (opened,) = h.fake.calls("views.open")  # opened before the click was acknowledged
    assert opened.params["trigger_id"] == trigger
    view = opened.params["view"]
    assert view["callback_id"] == REJECT_VIEW and view["type"] == "modal"
    assert [b["block_id"] for b in view["blocks"]] == ["reason"]
    metadata = json.loads(view["private_metadata"])
    assert metadata["approval_id"] == pending.approval_id
    assert metadata["thread_ts"] == pending.thread_ts
    await h.drained()
    assert await h.approval_status(pending.session, pending.approval_id) == "pending"

    # A message in the thread meanwhile waits for the decision (the sender is told).
    held = message_event("read notes.txt", thread_ts=pending.thread_ts)
    assert (await h.post(event_body(held)))[0] == 200
    await h.await_post(
        lambda c: (
            c.params.get("thread_ts") == pending.thread_ts
            and f"Waiting for a decision on approval {pending.approval_id}" in str(c.params["text"])
        ),
        "the notice that the message waits",
    )
    await h.drained()
    assert not [t for t in h.texts(thread_ts=pending.thread_ts) if "lazy dog" in t]

    values = {"reason": {"reason": {"type": "plain_text_input", "value": "not on a Friday"}}}
    body = view_submission_body(
        REJECT_VIEW,
        view["private_metadata"],
        values,
        user=ADMIN,
        view_id=f"V{uuid.uuid4().hex[:10].upper()}",
    )
    status, _ = await h.post(body)
    assert status == 200
    answer = await h.await_post(
        lambda c: (
            c.params.get("thread_ts") == pending.thread_ts
            and "did not complete" in str(c.params.get("text"))
        ),
        "the answer after the rejection",
    )
    await h.drained()

    assert f"rejected by slack:{ADMIN}: not on a Friday" in answer.params["text"]
    assert "the tool was not executed" in answer.params["text"]
    # The held message ran after the rejected run, in the same thread.
    await h.await_post(
        lambda c: (
            c.params.get("thread_ts") == pending.thread_ts
            and "lazy dog" in str(c.params.get("text"))
        ),
        "the held message's answer",
    )
    await h.drained()
    texts = h.texts(thread_ts=pending.thread_ts)
    assert texts.index(answer.params["text"]) < texts.index(NOTES.rstrip("\n"))
    assert victim.read_text() == "precious"
    updated = h.fake.message(CHANNEL, pending.notice_ts)
    assert updated is not None and buttons(updated.blocks or []) == []
    assert f"Rejected by <@{ADMIN}>: not on a Friday" in block_text(updated.blocks)
    assert await h.approval_status(pending.session, pending.approval_id) == "rejected"


async def test_edit_button_opens_the_arguments_and_the_edited_call_runs(h: Harness) -> None:
    """Edit and approve: the modal is prefilled with the call's arguments; what the policy
    denies is refused with the reason; the edited call runs (never the original), the notice
    and the audit say so; a second submission of the same modal is refused."""
    keep, drop = h.workdir / "keep.txt", h.workdir / "drop.txt"
    keep.write_text("keep")
    drop.write_text("drop")
    pending = await request_risky(h, "run: rm -f keep.txt")
    (edit,) = [b for b in buttons(blocks_of(pending.notice)) if b["action_id"] == EDIT]
    assert edit["value"] == edit_value(pending, "rm -f keep.txt")
    trigger = f"{uuid.uuid4().int % 10**9}.1.{uuid.uuid4().hex}"
    body = block_action_body(
        EDIT,
        edit["value"],
        user=APPROVER,
        message_ts=pending.notice_ts,
        thread_ts=pending.thread_ts,
        message_blocks=blocks_of(pending.notice),
        trigger_id=trigger,
    )
    assert (await h.post(body))[0] == 200
    (opened,) = h.fake.calls("views.open")
    assert opened.params["trigger_id"] == trigger
    view = opened.params["view"]
    assert view["callback_id"] == EDIT_VIEW
    (field,) = view["blocks"]
    assert json.loads(field["element"]["initial_value"]) == {"command": "rm -f keep.txt"}

    async def submit(arguments: str) -> None:
        values = {"arguments": {"arguments": {"type": "plain_text_input", "value": arguments}}}
        body = view_submission_body(
            EDIT_VIEW, view["private_metadata"], values, user=APPROVER, view_id=f"V{next_ts()}"
        )
        assert (await h.post(body))[0] == 200

    await submit('{"command": "rm -rf /"}')
    (refused,) = await h.fake.await_for(
        lambda: h.fake.ephemerals(CHANNEL, APPROVER), 15, what="the refusal"
    )
    assert f"Approval {pending.approval_id} not edited" in refused.params["text"]
    assert "refused by the risk policy" in refused.params["text"]
    await h.drained()
    assert await h.approval_status(pending.session, pending.approval_id) == "pending"

    await submit('{\n  "command": "rm -f drop.txt"\n}')
    answer = await h.await_post(
        lambda c: (
            c.params.get("thread_ts") == pending.thread_ts
            and str(c.params.get("text")).endswith("[exit code 0]")
        ),
        "the answer after the edited call ran",
    )
    await h.drained()
    assert keep.read_text() == "keep" and not drop.exists()
    assert "(run with the approver's edits: command:" in answer.params["text"]
    updated = h.fake.message(CHANNEL, pending.notice_ts)
    assert updated is not None and buttons(updated.blocks or []) == []
    assert "rm -f drop.txt" in block_text(updated.blocks)
    assert f"Approved by <@{APPROVER}>" in block_text(updated.blocks)
    entries = await AuditLog(h.redis, Keys(h.prefix)).newest(50)
    (edited,) = [e for e in entries if e.event == "approval_edited"]
    assert edited.fields["diff"] == 'command: "rm -f keep.txt" -> "rm -f drop.txt"'
    assert edited.actor == f"slack:{APPROVER}"

    keep_before = len(h.fake.ephemerals(CHANNEL, APPROVER))
    await submit('{"command": "rm -f keep.txt"}')  # stale: it was decided
    await h.fake.await_for(
        lambda: len(h.fake.ephemerals(CHANNEL, APPROVER)) > keep_before, 15, what="refusal"
    )
    assert "already decided" in h.fake.ephemerals(CHANNEL, APPROVER)[-1].params["text"]
    await h.drained()
    assert keep.read_text() == "keep"


async def test_url_verification_challenge_is_answered(h: Harness) -> None:
    body = json.dumps({"token": "legacy", "challenge": "chal-123", "type": "url_verification"})
    status, text = await h.post(body)
    assert status == 200 and json.loads(text) == {"challenge": "chal-123"}
    assert (await h.post(body, secret="wrong"))[0] == 401
    assert await h.enqueued() == 0


# ---------------------------------------------------------------------------------------------
# 6. Redeliveries run once
# ---------------------------------------------------------------------------------------------


async def test_retried_and_doubled_deliveries_run_once(h: Harness) -> None:
    ts = next_ts()
    body = event_body(mention_event("read notes.txt", ts=ts))
    assert (await h.post(body))[0] == 200
    assert (await h.post(body, retry_num=1))[0] == 200
    assert (await h.post(body, retry_num=2))[0] == 200
    await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
    await h.drained()
    assert await h.enqueued() == 1
    assert [t for t in h.texts(thread_ts=ts) if "lazy dog" in t] == [NOTES.rstrip("\n")]
    one_run = await h.history_length(session_of(ts))

    # One message, two events: `app_mention` and `message` (different event ids, same ts).
    ts2 = next_ts()
    mention = mention_event("read notes.txt", ts=ts2)
    as_message = message_event(str(mention["text"]), ts=ts2)
    assert (await h.post(event_body(mention, event_id=new_event_id())))[0] == 200
    assert (await h.post(event_body(as_message, event_id=new_event_id())))[0] == 200
    await h.await_post(
        lambda c: c.params.get("thread_ts") == ts2 and "lazy dog" in str(c.params.get("text")),
        "the second answer",
    )
    await h.drained()
    assert await h.enqueued() == 2
    assert [t for t in h.texts(thread_ts=ts2) if "lazy dog" in t] == [NOTES.rstrip("\n")]
    assert await h.history_length(session_of(ts2)) == one_run


# ---------------------------------------------------------------------------------------------
# 7. Bad requests: refused, nothing queued, nothing posted
# ---------------------------------------------------------------------------------------------


async def test_bad_requests_are_refused_and_never_queued(h: Harness) -> None:
    good = event_body(mention_event("read notes.txt"))

    assert (await h.post(good, secret="wrong-secret"))[0] == 401
    assert (await h.post(good, timestamp=int(time.time()) - 600))[0] == 401
    headers = {"Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(h.url, data=good, headers=headers) as resp,  # no signature at all
    ):
        assert resp.status == 401

    assert (await h.post('{"type": "event_callback", "event": '))[0] == 400
    missing_ts = json.loads(good)
    del missing_ts["event"]["ts"]
    assert (await h.post(json.dumps(missing_ts)))[0] == 400
    assert (await h.post("just some text"))[0] == 400

    huge = event_body(mention_event("read notes.txt " + "x" * (1024 * 1024)))
    assert (await h.post(huge))[0] == 413

    # Inputs are queued before the answer: a wrongly accepted one would be in the stream now.
    assert await h.enqueued() == 0
    assert await h.seen_keys() == []
    assert h.fake.posts() == [] and h.fake.ephemerals() == []


async def test_redis_down_answers_503_and_queues_nothing(
    fake: FakeSlack, workdir: Path, tmp_path: Path
) -> None:
    async with own_redis(tmp_path, fake) as redis_server:
        (workdir / "notes.txt").write_text(NOTES)
        async with serving(fake, workdir, redis_server.url) as h:
            assert (await h.get("/readyz"))[0] == 200
            ts = next_ts()
            assert (await h.post(event_body(mention_event("read notes.txt", ts=ts))))[0] == 200
            await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "an answer")
            await h.drained()
            posted = len(h.fake.posts())

            redis_server.kill()
            status, text = await h.post(event_body(mention_event("read notes.txt")))
            assert status == 503, text
            status, _ = await h.post(command_body("/approve", "abc123", user_id=ADMIN))
            assert status == 503
            status, text = await h.get("/readyz")
            assert status == 503 and "redis unreachable" in text
            assert (await h.get("/healthz"))[0] == 200  # the process itself is fine
            assert len(h.fake.posts()) == posted  # nothing was queued, so nothing ran


# ---------------------------------------------------------------------------------------------
# 8. Which messages the bot answers
# ---------------------------------------------------------------------------------------------


async def test_threads_dms_and_bots(h: Harness) -> None:
    ts = next_ts()
    assert (await h.post(event_body(mention_event("read notes.txt", ts=ts))))[0] == 200
    await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
    await h.drained()

    # A follow-up in that thread, without a mention, is answered in the thread.
    (h.workdir / "more.txt").write_text("second file body\n")
    follow_up = message_event("read more.txt", thread_ts=ts)
    assert (await h.post(event_body(follow_up)))[0] == 200
    answer = await h.await_post(
        lambda c: "second file body" in str(c.params.get("text")), "the follow-up answer"
    )
    assert answer.params["thread_ts"] == ts
    await h.drained()

    # A thread the bot never joined: queued (Redis decides), then ignored.
    stranger = next_ts()
    before = await h.enqueued()
    elsewhere = message_event("read notes.txt", thread_ts=stranger)
    assert (await h.post(event_body(elsewhere)))[0] == 200
    await h.drained()
    assert await h.enqueued() == before + 1
    assert h.fake.posts(CHANNEL, stranger) == [] and h.fake.ephemerals() == []
    assert await h.history_length(session_of(stranger)) == 0

    # The bot's own messages and other bots' messages are not even queued.
    before = await h.enqueued()
    own = message_event("read notes.txt", user=BOT_USER_ID, thread_ts=ts, bot_id=BOT_ID)
    other_bot = message_event("read notes.txt", user="U_OTHERBOT", thread_ts=ts, bot_id="B999")
    bot_message = message_event(
        "read notes.txt", thread_ts=ts, bot_id="B999", subtype="bot_message"
    )
    bot_message.pop("user")
    for event in (own, other_bot, bot_message):
        assert (await h.post(event_body(event)))[0] == 200
    await h.drained()
    assert await h.enqueued() == before
    assert len([t for t in h.texts(thread_ts=ts) if "lazy dog" in t]) == 1

    # A DM is answered at the top level of the DM.
    dm = message_event("read notes.txt", channel="D0DM", channel_type="im")
    assert (await h.post(event_body(dm)))[0] == 200
    reply = await h.await_post(
        lambda c: "lazy dog" in str(c.params.get("text")), "the DM answer", channel="D0DM"
    )
    assert reply.params.get("thread_ts") is None
    await h.drained()
    assert all(c.params.get("thread_ts") is None for c in h.fake.posts("D0DM"))


# ---------------------------------------------------------------------------------------------
# 9. Rate limits
# ---------------------------------------------------------------------------------------------


async def test_rate_limited_reply_is_posted_once(h: Harness) -> None:
    ts = next_ts()
    assert (await h.post(event_body(mention_event("read notes.txt", ts=ts))))[0] == 200
    await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
    await h.drained()

    # The follow-up's only message is its answer (no tool ran): rate limit exactly that post.
    h.fake.fail_next("chat.postMessage", status=429, retry_after=0)
    before = len(h.fake.posts())
    assert (await h.post(event_body(message_event("hello there", thread_ts=ts))))[0] == 200
    await h.await_post(lambda c: "offline demo model" in str(c.params.get("text")), "the reply")
    await h.drained()

    attempts = h.fake.attempts("chat.postMessage")
    assert [a.status for a in attempts[before:]] == [429, 200]
    assert attempts[before].params == attempts[before + 1].params
    grammar = [t for t in h.texts(thread_ts=ts) if t.startswith("I am the offline demo model")]
    assert len(grammar) == 1
    assert len(h.fake.posts()) == before + 1


@pytest.mark.parametrize("landed", [False, True], ids=["not posted", "posted, answer lost"])
async def test_reply_that_failed_on_slack_s_side_is_posted_once(h: Harness, landed: bool) -> None:
    """A 500 may come after Slack posted: clawgate looks for its tagged post before posting
    again, so the answer appears exactly once either way."""
    ts = next_ts()
    assert (await h.post(event_body(mention_event("read notes.txt", ts=ts))))[0] == 200
    await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
    await h.drained()

    h.fake.error_next("chat.postMessage", "internal_error", status=500, after=landed)
    assert (await h.post(event_body(message_event("hello there", thread_ts=ts))))[0] == 200
    await h.drained()
    grammar = [t for t in h.texts(thread_ts=ts) if t.startswith("I am the offline demo model")]
    assert len(grammar) == 1
    assert h.fake.calls("conversations.replies"), "the thread was not searched before a retry"
    tags = [c.params["metadata"]["event_payload"]["post"] for c in h.fake.posts(CHANNEL, ts)]
    assert len(tags) == len(set(tags))  # no post went out twice


# ---------------------------------------------------------------------------------------------
# 10. Health, readiness and metrics
# ---------------------------------------------------------------------------------------------


def sample(metrics: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(metrics):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


async def test_readiness_answers_within_a_second_while_redis_hangs(
    fake: FakeSlack, workdir: Path
) -> None:
    """A Redis that accepts connections and never answers (stalled, not down)."""
    stalled: list[asyncio.StreamWriter] = []

    async def swallow(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stalled.append(writer)  # keep it open, never answer

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with serving(fake, workdir, f"redis://127.0.0.1:{port}/0", start_worker=False) as h:
            started = time.monotonic()
            status, text = await h.get("/readyz")
            took = time.monotonic() - started
    finally:
        for writer in stalled:
            writer.close()
        server.close()
    assert status == 503 and "did not answer" in text
    assert took < 1.5


async def test_readiness_says_when_bash_has_no_sandbox(
    fake: FakeSlack, workdir: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ready (every bash call asks instead), with the reason in the details."""
    monkeypatch.setenv("PATH", str(workdir))  # no bwrap to be found
    async with serving(fake, workdir, redis_url) as h:
        status, text = await h.get("/readyz")
        assert status == 200
        assert text.startswith("ready\n")
        assert "warning: no OS sandbox to run it read-only (bwrap is not installed)" in text


async def test_health_readiness_and_metrics(fake: FakeSlack, workdir: Path, redis_url: str) -> None:
    (workdir / "notes.txt").write_text(NOTES)
    async with serving(fake, workdir, redis_url, start_worker=False) as h:
        assert await h.get("/healthz") == (200, "ok\n")
        status, text = await h.get("/readyz")
        assert status == 503 and "worker not polling" in text
        assert h.service.worker is not None
        await h.service.worker.start()
        status, text = await h.get("/readyz")
        assert status == 200 and text.startswith("ready\n")
        # The tests' Redis keeps no append-only file: said, not assumed.
        assert "warning: Redis keeps no append-only file" in text

        _, before = await h.get("/metrics")
        ts = next_ts()
        body = event_body(mention_event("read notes.txt", ts=ts))
        assert (await h.post(body))[0] == 200
        assert (await h.post(body, retry_num=1))[0] == 200
        assert (await h.post(body, secret="nope"))[0] == 401
        await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
        pending = await request_risky(h, "run: rm -f victim.txt")
        await h.drained()
        status, after = await h.get("/metrics")
        assert status == 200

        def grew(name: str, **labels: str) -> float:
            return sample(after, name, **labels) - sample(before, name, **labels)

        inbound = "clawgate_inbound_requests_total"
        assert grew(inbound, platform="slack", kind="event_callback", outcome="accepted") == 3
        assert grew(inbound, platform="slack", kind="unknown", outcome="unauthorized") == 1
        assert grew("clawgate_dedupe_hits_total", platform="slack") == 1
        assert grew("clawgate_runs_total", stop_reason="final") == 1
        assert grew("clawgate_runs_total", stop_reason="approval_required") == 1
        assert grew("clawgate_approvals_total", outcome="requested") == 1
        assert "clawgate_queue_depth{" in after
        assert sample(after, "clawgate_queue_depth", state="waiting") == 0
        # What the alerts in deploy/prometheus read, served from Redis at each scrape.
        assert sample(after, "clawgate_queue_oldest_waiting_seconds") == 0
        assert sample(after, "clawgate_workers_polling") == 1
        assert sample(after, "clawgate_redis_up") == 1
        assert pending.approval_id

        await h.service.worker.stop(1)
        status, text = await h.get("/readyz")
        assert status == 503 and "worker not polling" in text


# ---------------------------------------------------------------------------------------------
# 11. Bad Slack settings fail at start, one line each
# ---------------------------------------------------------------------------------------------

SLACK_VARS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "SLACK_API_URL")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"SLACK_BOT_TOKEN": "xoxb-1"},
            ["SLACK_SIGNING_SECRET: required to receive Slack requests over HTTP"],
        ),
        (
            {"SLACK_BOT_TOKEN": "xoxp-user-token", "SLACK_SIGNING_SECRET": "s"},
            ["SLACK_BOT_TOKEN: expected a bot token starting with xoxb-"],
        ),
        (
            {"SLACK_BOT_TOKEN": "xoxp-user", "SLACK_APP_TOKEN": "xoxb-not-an-app-token"},
            [
                "SLACK_BOT_TOKEN: expected a bot token starting with xoxb-",
                "SLACK_APP_TOKEN: expected an app-level token starting with xapp-",
            ],
        ),
        (
            {"SLACK_SIGNING_SECRET": "s"},
            ["SLACK_BOT_TOKEN: required when other SLACK_* settings are set"],
        ),
    ],
)
def test_bad_slack_settings_name_every_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], expected: list[str]
) -> None:
    assert_settings_errors(monkeypatch, tmp_path, SLACK_VARS, env, expected)


def test_slack_settings_that_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Socket Mode needs no signing secret.
    env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    assert load_settings_in(monkeypatch, tmp_path, SLACK_VARS, env).slack_enabled


def test_serve_with_bad_slack_settings_exits_2(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLACK_", "CLAWGATE_", "OPENAI_", "REDIS_"))
        and "proxy" not in key.lower()
    }
    env |= {"SLACK_BOT_TOKEN": "xoxp-not-a-bot", "CLAWGATE_PORT": str(free_port())}
    clawgate = Path(sys.executable).parent / "clawgate"
    command = [str(clawgate)] if clawgate.exists() else [sys.executable, "-m", "bot.cli"]
    done = run_serve(command, env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "clawgate: SLACK_BOT_TOKEN: expected a bot token starting with xoxb-",
        "clawgate: SLACK_SIGNING_SECRET: required to receive Slack requests over HTTP "
        "(or set SLACK_APP_TOKEN for Socket Mode)",
    ]


async def test_serve_without_its_worker_only_ingests(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    """CLAWGATE_WORKER_MODE=none: the HTTP process only queues; a worker elsewhere (here
    another service on the same Redis) answers. /readyz needs some worker to be polling."""
    (workdir / "notes.txt").write_text(NOTES)
    async with serving(fake, workdir, redis_url, CLAWGATE_WORKER_MODE="none") as h:
        assert h.service.worker is None
        status, text = await h.get("/readyz")
        assert status == 503 and "no worker is polling" in text
        ts = next_ts()
        assert (await h.post(event_body(mention_event("read notes.txt", ts=ts))))[0] == 200
        await asyncio.sleep(0.3)
        assert h.fake.posts(CHANNEL, ts) == []  # queued, not run: nobody works here
        assert await h.enqueued() == 1

        elsewhere = await build_service(h.settings, load_policy_file(None), worker=True)
        assert elsewhere.worker is not None
        await elsewhere.worker.start()
        try:
            await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
            status, text = await h.get("/readyz")
            assert status == 200 and text.startswith("ready\n")
        finally:
            await elsewhere.worker.stop(1)
            await elsewhere.aclose()


async def test_typed_commands_in_the_thread_decide_in_the_approvals_lane(h: Harness) -> None:
    """`@bot /approve <id>` typed in the thread, and a slash command typed elsewhere in the
    channel, are queued in the approval's own session: never beside its messages."""
    log = h.workdir / "log.txt"
    pending = await request_risky(h, "run: echo ran &gt;&gt; log.txt")
    await h.drained()
    lane = await h.service.inbox.redis.get(f"{h.prefix}:approval-session:{pending.approval_id}")
    assert lane == pending.session

    typed = mention_event(f"/approve {pending.approval_id}", user=APPROVER, ts=next_ts())
    typed["thread_ts"] = pending.thread_ts
    assert (await h.post(event_body(typed)))[0] == 200
    await h.await_post(
        lambda c: (
            c.params.get("thread_ts") == pending.thread_ts
            and str(c.params.get("text")) == "[exit code 0]"
        ),
        "the answer after the typed approval",
    )
    await h.drained()
    assert log.read_text() == "ran\n"

    second = await request_risky(h, "run: echo again &gt;&gt; log.txt")
    status, _ = await h.post(
        command_body("/reject", f"{second.approval_id} not today", user_id=ADMIN)
    )
    assert status == 200
    await h.await_post(
        lambda c: (
            c.params.get("thread_ts") == second.thread_ts
            and "not today" in str(c.params.get("text"))
        ),
        "the answer after the typed rejection",
    )
    await h.drained()
    assert log.read_text() == "ran\n"
    updated = h.fake.message(CHANNEL, second.notice_ts)
    assert updated is not None and "not today" in block_text(updated.blocks)


async def test_events_of_another_workspace_are_ignored(h: Harness) -> None:
    ts = next_ts()
    body = event_body(mention_event("read notes.txt", ts=ts), team_id="T_OTHER")
    assert (await h.post(body))[0] == 200  # acknowledged, so Slack does not retry it
    assert await h.enqueued() == 0
    await asyncio.sleep(0.2)
    assert h.fake.posts() == []


async def test_an_edited_mention_never_runs_again_even_past_the_dedupe_window(
    h: Harness,
) -> None:
    """Slack sends `app_mention` again, same ts, when a mention is edited. Within the dedupe
    window the message's key catches it; past it (its key gone, as here) it is still no new
    request."""
    ts = next_ts()
    assert (await h.post(event_body(mention_event("read notes.txt", ts=ts))))[0] == 200
    await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
    await h.drained()
    queued, posted = await h.enqueued(), len(h.fake.posts())
    await h.redis.delete(*await h.seen_keys())  # the dedupe window has passed
    edited = mention_event("read notes.txt again", ts=ts) | {"edited": {"user": "U_ALICE"}}
    assert (await h.post(event_body(edited)))[0] == 200
    await asyncio.sleep(0.3)
    await h.drained()
    assert await h.enqueued() == queued
    assert len(h.fake.posts()) == posted


async def test_a_slack_connect_user_from_another_organisation_is_answered(h: Harness) -> None:
    """In a channel shared over Slack Connect, the event of someone from another organisation
    names their workspace in `team_id`; this bot's installation sees it (context_team_id,
    authorizations): answered in the thread, in this workspace's session."""
    ts = next_ts()
    event = mention_event("read notes.txt", ts=ts, user="U_PARTNER", team_id="T_PARTNER")
    event |= {"user_team": "T_PARTNER", "source_team": "T_PARTNER"}
    envelope = json.loads(event_body(event, team_id="T_PARTNER"))
    envelope |= {"context_team_id": TEAM_ID, "is_ext_shared_channel": True}
    envelope["authorizations"][0]["team_id"] = TEAM_ID
    assert (await h.post(json.dumps(envelope)))[0] == 200
    answer = await h.await_post(lambda c: "lazy dog" in str(c.params.get("text")), "the answer")
    assert answer.params["channel"] == CHANNEL and answer.params["thread_ts"] == ts
    assert await h.history_length(session_of(ts)) > 0


async def test_reject_dialog_that_cannot_open_asks_to_type_the_reason(h: Harness) -> None:
    victim = h.workdir / "victim.txt"
    victim.write_text("precious")
    pending = await request_risky(h, "run: rm -f victim.txt")
    h.fake.fail_next("views.open", status=429, retry_after=5)  # no 5 s wait: no retry here
    url = h.fake.new_response_url()
    body = block_action_body(
        REJECT,
        pending.approval_id,
        user=ADMIN,
        message_ts=pending.notice_ts,
        thread_ts=pending.thread_ts,
        response_url=url,
    )
    status, _ = await h.post(body)
    assert status == 200
    (answer,) = h.fake.responses(url)
    assert f"/reject {pending.approval_id} <reason>" in str(answer.body)
    assert victim.read_text() == "precious"
    assert await h.approval_status(pending.session, pending.approval_id) == "pending"


async def test_held_messages_run_in_their_lane_after_an_expiry(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    """The sweeper expires the approval; the message held meanwhile is queued as a job of its
    session (not run inside the sweeper) and answered."""
    (workdir / "notes.txt").write_text(NOTES)
    async with serving(fake, workdir, redis_url, CLAWGATE_APPROVAL_TIMEOUT="1") as h:
        pending = await request_risky(h, "run: rm -f victim.txt")
        held = message_event("read notes.txt", thread_ts=pending.thread_ts)
        assert (await h.post(event_body(held)))[0] == 200
        await h.drained()
        assert not [t for t in h.texts(thread_ts=pending.thread_ts) if "lazy dog" in t]
        before = await h.enqueued()

        await asyncio.sleep(1.2)
        assert await h.service.runtime.sweep() == 1
        assert await h.enqueued() == before + 1  # the release, queued in the session's lane
        await h.await_post(
            lambda c: (
                c.params.get("thread_ts") == pending.thread_ts
                and "lazy dog" in str(c.params.get("text"))
            ),
            "the held message's answer",
        )
        updated = h.fake.message(CHANNEL, pending.notice_ts)
        assert updated is not None and "Expired" in block_text(updated.blocks)


# ---------------------------------------------------------------------------------------------
# The tool policy from Slack
# ---------------------------------------------------------------------------------------------


async def test_admin_denies_bash_with_a_slash_command_and_the_model_no_longer_sees_it(
    h: Harness,
) -> None:
    (h.workdir / "victim.txt").write_text("precious")
    refused_url = h.fake.new_response_url()
    body = command_body("/clawgate", "policy deny bash", user_id=BOB, response_url=refused_url)
    assert (await h.post(body))[0] == 200
    (refused,) = await h.fake.await_for(lambda: h.fake.responses(refused_url), 15, what="refusal")
    assert "only admins may change the policy" in refused.body["text"]
    assert refused.body.get("response_type") == "ephemeral"

    url = h.fake.new_response_url()
    body = command_body("/clawgate", "policy deny bash", user_id=ADMIN, response_url=url)
    assert (await h.post(body))[0] == 200
    (changed,) = await h.fake.await_for(lambda: h.fake.responses(url), 15, what="the change")
    assert f"bash in slack:{TEAM_ID}:{CHANNEL}: now denied" in changed.body["text"]

    ts = next_ts()
    assert (await h.post(event_body(mention_event("run: rm victim.txt", ts=ts))))[0] == 200
    answer = await h.await_post(
        lambda c: c.params.get("thread_ts") == ts and "not enabled here" in str(c.params["text"]),
        "the answer without bash",
    )
    assert "(enabled: read, write, edit, send_file, clarify)" in answer.params["text"]
    await h.drained()
    assert (h.workdir / "victim.txt").read_text() == "precious"

    show_url = h.fake.new_response_url()
    body = command_body("/clawgate", "policy show", user_id=BOB, response_url=show_url)
    assert (await h.post(body))[0] == 200
    (shown,) = await h.fake.await_for(lambda: h.fake.responses(show_url), 15, what="the policy")
    bash_line = next(line for line in shown.body["text"].splitlines() if "bash" in line)
    assert "denied" in bash_line and f"by <@{ADMIN}>" in bash_line

    audit = await AuditLog(h.redis, Keys(h.prefix)).newest(50)
    changes = [(e.event, e.actor) for e in audit if e.event.startswith("policy")]
    assert changes == [("policy_refused", f"slack:{BOB}"), ("policy_changed", f"slack:{ADMIN}")]


async def test_someone_the_access_policy_leaves_out_is_refused_privately(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    policy = workdir.parent / "access.toml"
    policy.write_text(f'[access]\nusers = ["slack:{ALICE}"]\n')
    (workdir / "victim.txt").write_text("precious")
    async with serving(fake, workdir, redis_url, CLAWGATE_POLICY_FILE=str(policy)) as h:
        ts = next_ts()
        mention = mention_event("run: rm victim.txt", user=BOB, ts=ts)
        assert (await h.post(event_body(mention)))[0] == 200
        (refusal,) = await h.fake.await_for(
            lambda: h.fake.ephemerals(CHANNEL, BOB), 15, what="the refusal"
        )
        assert "is not among the people who may use clawgate here" in refusal.params["text"]
        await h.drained()
        assert h.fake.posts(CHANNEL, ts) == []  # nothing in the thread: no run, no progress
        assert await h.history_length(session_of(ts)) == 0
        assert (h.workdir / "victim.txt").read_text() == "precious"

        ts = next_ts()  # Alice may
        assert (await h.post(event_body(mention_event("read victim.txt", ts=ts))))[0] == 200
        await h.await_post(lambda c: "precious" in str(c.params.get("text")), "Alice's answer")


async def test_a_group_dm_is_closed_with_direct_messages_and_pending_follows_access(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    policy = workdir.parent / "closed.toml"
    policy.write_text(f'[access]\nusers = ["slack:{ALICE}"]\ndirect_messages = false\n')
    async with serving(fake, workdir, redis_url, CLAWGATE_POLICY_FILE=str(policy)) as h:
        # A group DM (mpim) mention is a direct message: closed, said to Alice alone.
        mpim = message_event(f"<@{BOT_USER_ID}> read notes.txt", channel="G0MPIM")
        mpim["channel_type"] = "mpim"
        assert (await h.post(event_body(mpim)))[0] == 200
        (refusal,) = await h.fake.await_for(
            lambda: h.fake.ephemerals("G0MPIM", ALICE), 15, what="the group DM refusal"
        )
        assert "direct messages with clawgate are closed here" in refusal.params["text"]
        await h.drained()
        assert h.fake.posts("G0MPIM") == []

        pending = await request_risky(h, "run: rm -f victim.txt")
        # Bob is outside [access]: `/clawgate pending` tells him so, not what waits; and so
        # does `/pending` typed in the thread.
        url = h.fake.new_response_url()
        body = command_body("/clawgate", "pending", user_id=BOB, response_url=url)
        assert (await h.post(body))[0] == 200
        (answer,) = await h.fake.await_for(lambda: h.fake.responses(url), 15, what="/pending")
        assert "is not among the people who may use clawgate here" in answer.body["text"]
        assert pending.approval_id not in answer.body["text"]
        typed = message_event("/pending", user=BOB, thread_ts=pending.thread_ts)
        assert (await h.post(event_body(typed)))[0] == 200
        (told,) = await h.fake.await_for(
            lambda: h.fake.ephemerals(CHANNEL, BOB), 15, what="the typed /pending"
        )
        assert "is not among the people who may use clawgate here" in told.params["text"]
        assert pending.approval_id not in told.params["text"]
        # Nor from the group DM, where even Alice is refused; in the channel she is answered.
        url = h.fake.new_response_url()
        body = command_body(
            "/clawgate",
            "pending",
            user_id=ALICE,
            channel_id="G0MPIM",
            channel_name="mpdm-alice--bob-1",
            response_url=url,
        )
        assert (await h.post(body))[0] == 200
        (answer,) = await h.fake.await_for(lambda: h.fake.responses(url), 15, what="mpim")
        assert "direct messages with clawgate are closed here" in answer.body["text"]
        url = h.fake.new_response_url()
        assert (
            await h.post(command_body("/clawgate", "pending", user_id=ALICE, response_url=url))
        )[0] == 200
        (listed,) = await h.fake.await_for(lambda: h.fake.responses(url), 15, what="Alice's list")
        assert pending.approval_id in listed.body["text"]


async def approve_from_a_copy(h: Harness, pending: Pending, copy: Call, channel: str) -> None:
    """The approver clicks Approve on the copy of the notice in `channel`: the run answers in
    the thread that asked, and both notices lose their buttons."""
    body = block_action_body(
        APPROVE_ONCE,
        pending.approval_id,
        user=APPROVER,
        channel=channel,
        message_ts=str(copy.response["ts"]),
        message_blocks=blocks_of(copy),
    )
    assert (await h.post(body))[0] == 200
    await h.await_post(
        lambda c: (
            c.params.get("thread_ts") == pending.thread_ts
            and str(c.params.get("text")) == "[exit code 0]"
        ),
        "the answer in the thread that asked",
    )
    await h.drained()
    for where, ts in ((CHANNEL, pending.notice_ts), (channel, copy.response["ts"])):
        updated = h.fake.message(where, str(ts))
        assert updated is not None and buttons(updated.blocks or []) == [], where
        assert f"Approved by <@{APPROVER}>" in block_text(updated.blocks)


async def test_a_request_is_decided_from_the_approvers_channel_and_every_copy_updated(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    """No approver in the channel that asks: the notice also goes to the approvers' channel
    the policy names; a click there decides it; both notices are updated; the run goes on in
    the thread that asked. The same buttons from a channel the policy does not name count
    for nothing."""
    approvers_channel = "C222"
    policy = workdir.parent / "routes.toml"
    policy.write_text(f'[approvals]\nnotify = ["slack:{TEAM_ID}:{approvers_channel}"]\n')
    log = workdir / "log.txt"
    async with serving(fake, workdir, redis_url, CLAWGATE_POLICY_FILE=str(policy)) as h:
        pending = await request_risky(h, "run: echo ran &gt;&gt; log.txt")
        copy = await h.await_post(lambda c: c.is_notice, "the copy", approvers_channel)
        assert "thread_ts" not in copy.params  # a message of its own in the approvers' channel
        assert f"Asked in:* <#{CHANNEL}>" in block_text(blocks_of(copy))
        assert {b["value"] for b in buttons(blocks_of(copy)) if b["action_id"] != EDIT} == {
            pending.approval_id
        }

        elsewhere = block_action_body(
            APPROVE_ONCE,
            pending.approval_id,
            user=APPROVER,
            channel="C333",
            message_ts=str(copy.response["ts"]),
            message_blocks=blocks_of(copy),
        )
        assert (await h.post(elsewhere))[0] == 200
        await h.fake.await_for(lambda: h.fake.ephemerals("C333", APPROVER), 15, what="refusal")
        await h.drained()
        assert not log.exists()

        await approve_from_a_copy(h, pending, copy, approvers_channel)
        assert log.read_text() == "ran\n"

        # The operator's `approvals show` lists both notices and the decisions so far.
        out = io.StringIO()
        args = argparse.Namespace(verb="show", id=pending.approval_id, json=False)
        assert await run_approvals_command(h.service.runtime.wing, args, out) == 0
        shown = out.getvalue()
        assert f"notice slack:{TEAM_ID}:{CHANNEL}  channel={CHANNEL}" in shown
        assert f"notice slack:{TEAM_ID}:{approvers_channel}  channel={approvers_channel}" in shown
        assert "event=approved" in shown and f"slack:{APPROVER}" in shown


async def test_a_decision_from_the_shell_updates_the_notice_and_the_run_answers_in_slack(
    h: Harness, redis_url: str
) -> None:
    from tests.processes import chat, clean_env  # noqa: PLC0415

    log = h.workdir / "log.txt"
    pending = await request_risky(h, "run: echo ran &gt;&gt; log.txt")
    env = clean_env(REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX=h.prefix)  # a worker runs it
    code, out, err = await chat(
        "", h.workdir.parent, env, "approvals", "approve", pending.approval_id, "--wait"
    )
    assert code == 0, err
    assert f"Approval {pending.approval_id} approved by operator:" in out
    assert "[exit code 0]" not in out  # the run answered where it was asked, not here
    assert log.read_text() == "ran\n"
    answers = [t for t in h.texts(CHANNEL, pending.thread_ts) if t == "[exit code 0]"]
    assert answers == ["[exit code 0]"]
    updated = h.fake.message(CHANNEL, pending.notice_ts)
    assert updated is not None and buttons(updated.blocks or []) == []
    assert "Approved by operator:" in block_text(updated.blocks)


async def test_a_request_sent_to_the_approvers_directly_is_decided_from_a_dm(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    policy = workdir.parent / "dm.toml"
    policy.write_text('[approvals]\nnotify = ["dm"]\n')
    log = workdir / "log.txt"
    async with serving(fake, workdir, redis_url, CLAWGATE_POLICY_FILE=str(policy)) as h:
        pending = await request_risky(h, "run: echo ran &gt;&gt; log.txt")
        dm = "D" + APPROVER.removeprefix("U")  # the bot's DM with the approver
        copy = await h.await_post(lambda c: c.is_notice, "the DM", dm)
        assert f"Asked in:* <#{CHANNEL}>" in block_text(blocks_of(copy))
        await approve_from_a_copy(h, pending, copy, dm)
        assert log.read_text() == "ran\n"


# ---------------------------------------------------------------------------------------------
# An answer streamed into one message
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("streams", [True, False], ids=["streamed", "streaming refused"])
async def test_a_streamed_answer_is_one_message_that_grows(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI, streams: bool
) -> None:
    """The answer grows in one message as the model writes it: a stream with at least
    three appends, or, where the workspace refuses streaming, a post edited as it grows
    (about once a second); either way no other message, and it ends as the whole answer."""
    fake.refuse_streaming = None if streams else "not_allowed"
    answer = "Here is the story: " + " ".join(f"word{i}" for i in range(40)) + ". The end."
    fake_openai.script = [streamed(answer, chunks=12, delay=0.3)]  # about 3.3 s of writing
    url = fake_openai.base_url
    async with serving(fake, workdir, redis_url, OPENAI_BASE_URL=url, OPENAI_API_KEY="k") as h:
        ts = next_ts()
        assert (await h.post(event_body(mention_event("tell me a story", ts=ts))))[0] == 200

        def finished() -> bool:
            return any(m.metadata for m in h.fake.answers(CHANNEL, ts))

        await h.fake.await_for(finished, 15, what="the answer")
        await h.drained()
        assert fake_openai.requests[0]["stream"] is True
        (message,) = h.fake.bot_messages(CHANNEL, ts)
        assert message.blocks is not None and message.blocks[0]["text"] == answer
        assert message.blocks[1]["type"] == "context_actions"
        if streams:
            assert message.appends >= 3 and h.fake.posts(CHANNEL, ts) == []
            assert len(h.fake.calls("chat.stopStream")) == 1
        else:
            (posted,) = h.fake.posts(CHANNEL, ts)
            edits = h.fake.updates(CHANNEL, message.ts)
            grown = [str(c.params["text"]) for c in [posted, *edits]]
            assert len(grown) >= 3 and grown[-1] == answer, grown
            assert all(answer.startswith(text) for text in grown)
            assert not any("Working" in text for text in grown)
            # Never two edits while written within a second of each other.
            gaps = [b.at - a.at for a, b in itertools.pairwise([posted, *edits[:-1]])]
            assert min(gaps) >= 0.99, gaps


# ---------------------------------------------------------------------------------------------
# A question back to the asker (the clarify tool)
# ---------------------------------------------------------------------------------------------


async def test_a_question_is_answered_by_the_requesters_click_alone(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    ask = {"question": "Which environment?", "options": ["staging", "prod"]}
    fake_openai.script = [calls(("call_q", "clarify", ask)), reply("Deploying to prod.")]
    url = fake_openai.base_url
    async with serving(fake, workdir, redis_url, OPENAI_BASE_URL=url, OPENAI_API_KEY="k") as h:
        ts = next_ts()
        assert (await h.post(event_body(mention_event("deploy it", ts=ts))))[0] == 200
        notice = await h.await_post(lambda c: c.is_notice, "the question")
        assert notice.params["thread_ts"] == ts  # in the thread that asked, nowhere else
        blocks = blocks_of(notice)
        assert f"<@{ALICE}> *Which environment?*" in block_text(blocks)
        options = buttons(blocks)
        assert [b["text"]["text"] for b in options] == ["staging", "prod"]
        question_id = str(options[0]["value"]).partition(":")[0]
        pending = Pending(ts, notice, question_id)
        await h.drained()
        status = "Waiting for an answer from the person who asked…"
        assert h.fake.statuses(CHANNEL, ts)[-1] == status

        # Someone else's click: told privately, nothing resumes, the refusal is audited.
        body = block_action_body(
            options[1]["action_id"],
            str(options[1]["value"]),
            user=BOB,
            message_ts=pending.notice_ts,
            thread_ts=ts,
            message_blocks=blocks,
        )
        assert (await h.post(body))[0] == 200
        (told,) = await h.fake.await_for(lambda: h.fake.ephemerals(CHANNEL, BOB), 15, what="no")
        assert f"Only <@{ALICE}> can answer this question" in told.params["text"]
        await h.drained()
        assert await h.approval_status(pending.session, question_id) == "pending"
        assert len(fake_openai.requests) == 1 and h.fake.updates(CHANNEL, pending.notice_ts) == []

        body = block_action_body(
            options[1]["action_id"],
            str(options[1]["value"]),
            user=ALICE,
            message_ts=pending.notice_ts,
            thread_ts=ts,
            message_blocks=blocks,
        )
        assert (await h.post(body))[0] == 200
        await h.await_post(lambda c: c.params.get("text") == "Deploying to prod.", "the answer")
        await h.drained()

        tool = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
        assert [m["content"] for m in tool] == ["The requester answered: prod"]
        updated = h.fake.message(CHANNEL, pending.notice_ts)
        assert updated is not None and buttons(updated.blocks or []) == []
        assert f"Answered by <@{ALICE}>: *prod*" in block_text(updated.blocks)
        assert await h.approval_status(pending.session, question_id) == "answered"
        trail = await AuditLog(h.redis, Keys(h.prefix)).newest(200)
        refusals = [e for e in trail if e.event == "approval_refused"]
        assert [e.actor for e in refusals] == [f"slack:{BOB}"]
        assert h.fake.ephemerals(CHANNEL, ALICE) == []
