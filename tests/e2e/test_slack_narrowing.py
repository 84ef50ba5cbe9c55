"""Approvals that cannot be narrowed, through Slack as people use it (the real slack_bolt app
behind a real HTTP server, the fake Slack, a real Redis): an edit keeps the two-person rule of
the call it replaces, a failed edit answers the approver in the thread, and the notice names
the files the agent changed unasked before it asked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.slack.inbound import APPROVE_ONCE
from tests.e2e.test_slack_serve import (
    ALICE,
    APPROVER,
    CHANNEL,
    Harness,
    Pending,
    block_text,
    blocks_of,
    click,
    request_risky,
    serving,
)
from tests.fake_slack import FakeSlack, event_body, mention_event, next_ts

pytestmark = pytest.mark.e2e  # a served app: the slow tier

DAVE = "U_DAVE"


@pytest.fixture
async def h(fake: FakeSlack, workdir: Path, redis_url: str) -> AsyncIterator[Harness]:
    policy = workdir.parent / "narrowing.toml"  # outside the work dir
    policy.write_text('[approvals]\nquorum_reasons = { "^rm " = 2 }\n')
    approvers = f"slack:{APPROVER},slack:{DAVE}"
    async with serving(
        fake, workdir, redis_url, CLAWGATE_POLICY_FILE=str(policy), CLAWGATE_APPROVERS=approvers
    ) as harness:
        yield harness


async def type_in_thread(h: Harness, pending: Pending, text: str, user: str) -> str:
    """`@bot <text>` typed in the approval's thread by `user`: the bot's answer, to them."""
    before = len(h.fake.ephemerals(CHANNEL, user))
    typed = mention_event(text, user=user, ts=next_ts())
    typed["thread_ts"] = pending.thread_ts
    assert (await h.post(event_body(typed)))[0] == 200

    def answered() -> str | None:
        told = h.fake.ephemerals(CHANNEL, user)
        return str(told[-1].params["text"]) if len(told) > before else None

    return await h.fake.await_for(answered, 15, what=f"the answer to {text[:40]!r}")


async def test_an_edit_keeps_the_two_person_rule_and_a_failed_edit_answers(h: Harness) -> None:
    (h.workdir / "x").write_text("x")
    pending = await request_risky(h, "run: rm -f x", user=ALICE)
    assert (await click(h, pending, APPROVE_ONCE, APPROVER))[0] == 200
    await h.drained()

    deep = "[" * 10_000 + "]" * 10_000
    answer = await type_in_thread(h, pending, f"/approve {pending.approval_id} edit {deep}", DAVE)
    assert answer == (
        f"Approval {pending.approval_id} not edited: the edited arguments are nested 10000 "
        "levels deep (at most 32)."
    )
    assert await h.approval_status(pending.session, pending.approval_id) == "pending"

    edit = json.dumps({"command": "find . -name x -delete"})  # alone it needs one approver
    answer = await type_in_thread(h, pending, f"/approve {pending.approval_id} edit {edit}", DAVE)
    assert answer == f"Approval {pending.approval_id}: 1 of 2 approvals; 1 more approver needed."
    await h.drained()
    assert (h.workdir / "x").exists()  # Carol's approval of `rm -f x` does not count for it
    notice = h.fake.message(CHANNEL, pending.notice_ts)
    assert notice is not None and "1 of 2 approvals" in block_text(notice.blocks)

    assert (await click(h, pending, APPROVE_ONCE, APPROVER))[0] == 200
    await h.drained()
    assert not (h.workdir / "x").exists()
    assert await h.approval_status(pending.session, pending.approval_id) == "consumed"


async def test_the_notice_names_the_files_changed_unasked(h: Harness) -> None:
    ts = next_ts()
    asked = mention_event("write Makefile: all:", user=ALICE, ts=ts)
    assert (await h.post(event_body(asked)))[0] == 200
    await h.drained()
    assert (h.workdir / "Makefile").read_text() == "all:\n"  # written without asking
    again = mention_event("run: make", user=ALICE, ts=next_ts())
    again["thread_ts"] = ts
    assert (await h.post(event_body(again)))[0] == 200

    def notice() -> str | None:
        posts = [c for c in h.fake.posts(CHANNEL, ts) if c.is_notice]
        return block_text(blocks_of(posts[0])) if posts else None

    shown = await h.fake.await_for(notice, 15, what="the approval notice")
    assert "*Note:* changed without approval since the last approval: Makefile" in shown
