"""Batches across two real `clawgate serve` processes sharing one Redis: a model turn asks for
three calls that each need two approvers (and a read between them that needs nobody); one
notice is posted for them. At the same moment one approver clicks "Approve all" on one process
while the other approves the first and third call and rejects the second on the other. In
every trial each approved call runs exactly once, in the model's order, and only with both
approvals; the rejected one never runs and the model is told who rejected it."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.slack.inbound import APPROVE_ONCE, REJECT_VIEW
from adapters.slack.payloads import ModalContext
from tests.e2e.test_quorum_processes import CAROL, DAVE, POLICY, Pair, serving_pair
from tests.e2e.test_worker_processes import CHANNEL
from tests.fake_openai import FakeOpenAI, Step, calls, reply
from tests.fake_slack import (
    Call,
    view_submission_body,
)

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

TRIALS = 200
AT_ONCE = 10  # trials in flight together
ASKED = re.compile(r"batch (t\d+)")


def turn(body: dict[str, Any]) -> Step:
    """The model: asked for `batch tN`, three appends to runs.log and a read between; given
    their results, `done tN` and what it was told about the second one."""
    messages = body["messages"]
    tag = next(m[1] for m in map(ASKED.search, map(str, (m["content"] for m in messages))) if m)
    if messages[-1]["role"] != "tool":
        echo = [(f"{tag}-{k}", "bash", {"command": f"echo {tag}-{k} >> runs.log"}) for k in "123"]
        return calls(echo[0], (f"{tag}-r", "read", {"path": "keep.txt"}), echo[1], echo[2])
    told = next(m["content"] for m in messages if m.get("tool_call_id") == f"{tag}-2")
    return reply(f"done {tag}: {told[:60]}")


class Batches(Pair):
    """The two processes, with a rejection typed into the reject modal and the answer waited
    for by its first words."""

    async def reject(self, url: str, user: str, thread: str, approval: str) -> None:
        context = ModalContext(approval_id=approval, channel=CHANNEL, thread_ts=thread)
        values = {"reason": {"reason": {"type": "plain_text_input", "value": "not this one"}}}
        body = view_submission_body(
            REJECT_VIEW,
            context.model_dump_json(),
            values,
            user=user,
            view_id=f"V{uuid.uuid4().hex[:10].upper()}",
        )
        await self.post(url, body)

    async def said(self, thread: str, tag: str) -> str:
        def done() -> str | None:
            texts = [str(c.params.get("text")) for c in self.fake.posts(CHANNEL, thread)]
            return next((t for t in texts if t.startswith(f"done {tag}")), None)

        return await self.fake.await_for(done, 30, what=f"the answer of {tag}")


def buttons(notice: Call) -> tuple[list[str], str]:
    """The items' approval ids (their Approve buttons, in order) and the batch's id."""
    items, batch = [], ""
    for block in notice.params["blocks"]:
        for element in block.get("elements", []):
            if element.get("action_id") != APPROVE_ONCE:
                continue
            if block.get("block_id") == "clawgate_batch":
                batch = str(element["value"])
            else:
                items.append(str(element["value"]))
    return items, batch


@pytest.fixture
async def pair(redis_url: str, workdir: Path, fake_openai: FakeOpenAI) -> AsyncIterator[Batches]:
    (workdir / "keep.txt").write_text("kept")
    fake_openai.respond = turn
    more = fake_openai.settings(CLAWGATE_STREAM="false")
    async with serving_pair(redis_url, workdir, POLICY, **more) as serving:
        yield Batches(serving.fake, serving.urls, serving.processes, serving.prefix)


async def test_two_approvers_deciding_one_batch_at_once_on_two_processes(
    pair: Batches, workdir: Path, redis: aioredis.Redis
) -> None:
    slots = asyncio.Semaphore(AT_ONCE)
    asked: dict[str, list[str]] = {}

    async def trial(n: int) -> None:
        tag = f"t{n}"
        async with slots:
            thread, notice = await pair.ask(tag, f"batch {tag}")
            items, batch = buttons(notice)
            assert len(items) == 3 and batch, notice.params["blocks"]
            asked[tag] = items
            one, two, three = items
            mine, theirs = pair.urls if n % 2 else pair.urls[::-1]
            await asyncio.gather(
                pair.approve(mine, CAROL, thread, notice, batch),  # approve all
                pair.approve(theirs, DAVE, thread, notice, one),
                pair.reject(theirs, DAVE, thread, two),
                pair.approve(theirs, DAVE, thread, notice, three),
            )
            said = await pair.said(thread, tag)
            assert f"rejected by slack:{DAVE}: not this one" in said, said
            assert len([c for c in pair.fake.posts(CHANNEL, thread) if c.is_notice]) == 1

    await asyncio.gather(*(trial(n) for n in range(TRIALS)))
    await asyncio.sleep(1.0)  # anything that would run a second time has had its chance

    lines = (workdir / "runs.log").read_text().split()
    expected = [f"t{n}-{k}" for n in range(TRIALS) for k in "13"]
    assert sorted(lines) == sorted(expected)  # each approved call once; no rejected one
    assert all(lines.index(f"t{n}-1") < lines.index(f"t{n}-3") for n in range(TRIALS))
    for tag, items in asked.items():
        key = str(await redis.get(f"{pair.prefix}:approval-session:{items[0]}"))
        records = [
            await redis.hgetall(f"{pair.prefix}:{{{key}}}:approval:{item}") for item in items
        ]
        assert [str(r["status"]) for r in records] == ["consumed", "rejected", "consumed"], tag
        for record in (records[0], records[2]):  # never without its two approvers
            assert sorted(str(record["approved_by"]).split(",")) == [
                f"slack:{CAROL}",
                f"slack:{DAVE}",
            ], (tag, record)
    for process in pair.processes:
        assert "Traceback" not in process.stderr, process.stderr
