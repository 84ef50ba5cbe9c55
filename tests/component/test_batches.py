"""Batches on a real Redis: the calls of one model turn that need a human are put to approvers
in one notice, decided one by one (or all at once), and carried out in the model's order,
each approved one exactly once, once none waits; also after a process died mid-way."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.cli_approvals import run_approvals_command
from runtime.agent import Runtime
from runtime.approval.decisions import Answer
from runtime.audit import AuditLog
from runtime.batch_resume import CANCELLED
from runtime.channel import ApprovalNotice, ApprovalRequested, ApprovalUpdated
from runtime.models import Actor, ConversationRef, StopReason
from runtime.policy.model import PolicyDocument
from runtime.providers.openai_provider import OpenAIProvider
from runtime.store.keys import Keys
from runtime.tools.base import ToolContext, ToolOutput
from runtime.tools.bash import BashTool
from runtime.tools.clarify import ClarifyTool
from runtime.tools.files import ReadArgs, ReadTool
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import Sandbox, SandboxMode
from tests.component.test_remote_decisions import SESSION, THREAD, Operator
from tests.component.test_retake import (
    Calls,
    Crash,
    Scripted,
    asks,
    bash,
    replies,
    runtime_with,
    says,
)
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.support import (
    ADMIN,
    ALICE,
    HERE,
    PREFIX,
    RecordingChannel,
    default_registry,
    make_runtime,
)

CAROL = Actor(platform="slack", user_id="UCAROL")
DAVE = Actor(platform="slack", user_id="UDAVE")
THREE = [
    ("c1", "bash", {"command": "rm a.txt"}),
    ("r1", "read", {"path": "keep.txt"}),
    ("c2", "bash", {"command": "rm b.txt"}),
    ("c3", "bash", {"command": "rm c.txt"}),
]


def files(workdir: Path, *names: str) -> None:
    for name in names:
        (workdir / name).write_text(name)


def openai(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider("fake", api_key="sk-test", base_url=fake.base_url, max_retries=0)


def tools_sent(fake: FakeOpenAI) -> list[tuple[str, str]]:
    """The tool messages of the model's last request: (call id, content)."""
    sent = fake.requests[-1]["messages"]
    return [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"]


async def batch_of(
    runtime: Runtime, channel: RecordingChannel, session: str, text: str = "clean up"
) -> ApprovalNotice:
    result = await runtime.run(session, text, ALICE, HERE)
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED
    (requested,) = channel.of(ApprovalRequested)  # one notice, whatever the calls
    return requested.notice


async def status(redis: aioredis.Redis, session: str, approval_id: str) -> str:
    return str(await redis.hget(f"{PREFIX}:{{{session}}}:approval:{approval_id}", "status"))


async def test_three_risky_calls_are_one_notice_and_run_in_order_once_each(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt", "b.txt", "c.txt", "keep.txt")
    fake_openai.script = [calls(*THREE), reply("done")]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    notice = await batch_of(runtime, channel, "b1")

    assert [i.arguments for i in notice.items] == ["rm a.txt", "rm b.txt", "rm c.txt"]
    assert notice.batch and all(i.batch == notice.batch for i in notice.items)
    one, two, three = (i.approval_id for i in notice.items)
    assert (await runtime.decide(one, True, ADMIN, HERE)).run is None
    assert (await runtime.decide(two, False, ADMIN, HERE, reason="keep b")).run is None
    assert (workdir / "a.txt").exists()  # nothing runs while an item waits
    assert len(fake_openai.requests) == 1
    last = await runtime.decide(three, True, ADMIN, HERE)

    assert last.run is not None and last.run.stop_reason is StopReason.FINAL
    assert not (workdir / "a.txt").exists() and not (workdir / "c.txt").exists()
    assert (workdir / "b.txt").exists()
    sent = tools_sent(fake_openai)
    assert [cid for cid, _ in sent] == ["c1", "r1", "c2", "c3"]  # the model's order, once each
    assert sent[1][1] == "keep.txt"
    assert sent[2][1].startswith(f"rejected by {ADMIN.key}: keep b")
    statuses = [await status(redis, "b1", i) for i in (one, two, three)]
    assert statuses == ["consumed", "rejected", "consumed"]
    assert await redis.get(f"{PREFIX}:{{b1}}:pending") is None
    # The one notice shows how each call ended.
    final = channel.of(ApprovalUpdated)[-1].notice
    assert [i.status for i in final.items] == ["consumed", "rejected", "consumed"]
    # Deciding again is refused, and runs nothing.
    again = await runtime.decide(one, True, ADMIN, HERE)
    assert not again.accepted and "already" in again.message
    assert len(fake_openai.requests) == 2


async def test_the_model_asking_again_for_a_rejected_call_stops(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt", "b.txt")
    batch = calls(("c1", "bash", {"command": "rm a.txt"}), ("c2", "bash", {"command": "rm b.txt"}))
    fake_openai.script = [batch, calls(("c9", "bash", {"command": "rm b.txt"}))]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    notice = await batch_of(runtime, channel, "b2")
    await runtime.decide(notice.items[0].approval_id, True, ADMIN, HERE)
    last = await runtime.decide(notice.items[1].approval_id, False, ADMIN, HERE)
    assert last.run is not None and last.run.final_text is not None
    assert last.run.final_text.startswith("Stopped: the model asked again")
    assert (workdir / "b.txt").exists()


async def test_approve_all_decides_only_what_the_decider_may(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt")
    document = PolicyDocument.model_validate(
        tomllib.loads("[approvals]\nquorum_tools = { bash = 2 }\n")
    )
    fake_openai.script = [
        calls(
            ("c1", "bash", {"command": "rm a.txt"}),
            ("c2", "write", {"path": ".env", "content": "X=1"}),
        ),
        reply("done"),
    ]
    runtime, channel = make_runtime(
        redis,
        workdir,
        openai(fake_openai),
        document=document,
        approvers=[CAROL.key, DAVE.key, ALICE.key],
        requester_may_approve=True,
    )
    notice = await batch_of(runtime, channel, "b3")
    rm, env = (i.approval_id for i in notice.items)
    assert [i.quorum for i in notice.items] == [2, 1]

    mine = await runtime.decide(notice.batch, True, ALICE, HERE)  # the requester: not for rm
    assert mine.accepted and mine.run is None
    assert f"Approved: {env}" in mine.message and rm in mine.message
    assert [await status(redis, "b3", i) for i in (rm, env)] == ["pending", "approved"]
    assert not (workdir / ".env").exists()

    counted = await runtime.decide(notice.batch, True, CAROL, HERE)  # one of two for rm
    assert counted.accepted and counted.run is None and "1 of 2" in counted.message
    done = await runtime.decide(notice.batch, True, DAVE, HERE)  # the second: it runs
    assert done.run is not None and done.run.stop_reason is StopReason.FINAL
    assert not (workdir / "a.txt").exists() and (workdir / ".env").read_text() == "X=1"
    assert [cid for cid, _ in tools_sent(fake_openai)] == ["c1", "c2"]


async def test_reject_all_tells_the_model_about_every_call(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt", "b.txt", "c.txt", "keep.txt")
    fake_openai.script = [calls(*THREE), reply("ok, nothing")]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    notice = await batch_of(runtime, channel, "b4")
    decision = await runtime.decide(notice.batch, False, ADMIN, HERE, reason="not today")
    assert decision.run is not None and decision.run.final_text == "ok, nothing"
    assert all((workdir / n).exists() for n in ("a.txt", "b.txt", "c.txt"))
    sent = dict(tools_sent(fake_openai))
    assert all("not today" in sent[c] for c in ("c1", "c2", "c3")) and sent["r1"] == "keep.txt"


async def test_an_item_expires_and_the_approved_ones_still_run(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt", "b.txt")
    batch = calls(("c1", "bash", {"command": "rm a.txt"}), ("c2", "bash", {"command": "rm b.txt"}))
    fake_openai.script = [batch, reply("a is gone")]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai), timeout_s=0.2)
    notice = await batch_of(runtime, channel, "b5")
    one, two = (i.approval_id for i in notice.items)
    await runtime.decide(one, True, ADMIN, HERE)
    await asyncio.sleep(0.25)
    assert await runtime.sweep() >= 1

    assert not (workdir / "a.txt").exists() and (workdir / "b.txt").exists()
    assert [await status(redis, "b5", i) for i in (one, two)] == ["consumed", "expired"]
    sent = dict(tools_sent(fake_openai))
    assert "expired" in sent["c2"]
    assert await redis.get(f"{PREFIX}:{{b5}}:pending") is None
    assert await runtime.sweep() == 0  # nothing left to do, nothing runs twice
    assert len(fake_openai.requests) == 2


async def test_an_edited_item_runs_as_edited(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt", "b.txt", "c.txt")
    batch = calls(("c1", "bash", {"command": "rm a.txt"}), ("c2", "bash", {"command": "rm b.txt"}))
    fake_openai.script = [batch, reply("done")]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    notice = await batch_of(runtime, channel, "b6")
    one, two = (i.approval_id for i in notice.items)
    edited = await runtime.decide(one, True, ADMIN, HERE, edit=json.dumps({"command": "rm c.txt"}))
    assert edited.accepted, edited.message
    await runtime.decide(two, True, ADMIN, HERE)

    assert (workdir / "a.txt").exists()
    assert not (workdir / "b.txt").exists() and not (workdir / "c.txt").exists()
    sent = dict(tools_sent(fake_openai))
    assert sent["c1"].startswith("(run with the approver's edits: command:")


async def test_cancel_withdraws_the_whole_batch(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt", "b.txt")
    batch = calls(("c1", "bash", {"command": "rm a.txt"}), ("c2", "bash", {"command": "rm b.txt"}))
    fake_openai.script = [batch]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    notice = await batch_of(runtime, channel, "b7")
    one, two = (i.approval_id for i in notice.items)
    await runtime.decide(one, True, ADMIN, HERE)
    said = await runtime.cancel("b7", ALICE, HERE)
    assert "withdrawn" in said
    assert [await status(redis, "b7", i) for i in (one, two)] == ["rejected", "rejected"]
    assert (workdir / "a.txt").exists() and (workdir / "b.txt").exists()
    assert await redis.get(f"{PREFIX}:{{b7}}:pending") is None
    late = await runtime.decide(two, True, ADMIN, HERE)
    assert not late.accepted


class HeldRead(ReadTool):
    """`read` (needs nobody) that starts, then waits until the test lets it finish."""

    def __init__(self) -> None:
        self.started, self.go = asyncio.Event(), asyncio.Event()

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolOutput:
        self.started.set()
        await self.go.wait()
        return await super().run(args, ctx)


async def test_cancel_while_a_batch_runs_rejects_its_approved_calls_not_yet_run(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """`/cancel` while the batch is carried out (its read running): the approved call after
    the read does not run; its approval ends rejected, in the global audit trail as such."""
    files(workdir, "a.txt", "b.txt", "keep.txt")
    fake_openai.script = [calls(*THREE[:3])]  # c1, the read, c2
    held = HeldRead()
    bash = BashTool(timeout=10, sandbox=Sandbox(SandboxMode.OFF))
    registry = ToolRegistry([held, bash])
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai), registry=registry)
    notice = await batch_of(runtime, channel, "b8")
    one, two = (i.approval_id for i in notice.items)
    await runtime.decide(one, True, ADMIN, HERE)
    carried = asyncio.create_task(runtime.decide(two, True, ADMIN, HERE))
    await asyncio.wait_for(held.started.wait(), 5)  # c1 ran; the read runs; c2 waits its turn

    said = await runtime.cancel("b8", ALICE, HERE)
    held.go.set()
    decision = await asyncio.wait_for(carried, 5)

    assert "Stopping the running request." in said
    assert decision.run is not None and decision.run.stop_reason is StopReason.CANCELLED
    assert not (workdir / "a.txt").exists()  # c1 ran before the cancel
    assert (workdir / "b.txt").exists()  # c2 did not run
    assert [await status(redis, "b8", i) for i in (one, two)] == ["consumed", "rejected"]
    answers = {m.tool_call_id: m for m in await runtime.history.load("b8") if m.role == "tool"}
    assert answers["c2"].content == CANCELLED
    trail = await AuditLog(redis, Keys(PREFIX)).newest(1000)
    (entry,) = [e for e in trail if e.event == "approved_call_cancelled"]
    assert entry.actor == "runtime"
    assert {k: entry.fields.get(k) for k in ("approval", "tool", "session", "conversation")} == {
        "approval": two,
        "tool": "bash",
        "session": "b8",
        "conversation": HERE.id,
    }
    assert entry.fields["why"] == "the run was cancelled before it ran"
    assert len(fake_openai.requests) == 1  # the cancelled run asked the model nothing more


def killed_at(call_id: str, *steps: Any, ran: bool = False) -> tuple[Scripted, Calls]:
    """The process dies at `call_id`: before its tool starts, or once it `ran`."""
    read = ("r1", "read", '{"path": "keep.txt"}')
    model = Scripted(asks(bash("c1", "rm a.txt"), read, bash("c2", "rm b.txt")), *steps)
    return model, Calls(crash=[call_id]) if ran else Calls(before=[call_id])


async def test_a_resume_killed_mid_batch_goes_on_without_running_anything_twice(
    redis: aioredis.Redis, workdir: Path
) -> None:
    files(workdir, "a.txt", "b.txt", "keep.txt")
    model, ran = killed_at("r1", says("all done"))
    first, channel = runtime_with(redis, workdir, model, ran)
    result = await first.run("k1", "clean up", ALICE, HERE, job="j1")
    assert result.approval_id is not None
    notice = channel.of(ApprovalRequested)[0].notice
    one, two = (i.approval_id for i in notice.items)
    await first.decide(one, True, ADMIN, HERE, job="d1")
    try:  # dies after c1 ran, at the read between the two approved calls
        await first.decide(two, True, ADMIN, HERE, job="d2")
        raise AssertionError("the process should have died")
    except Crash:
        pass
    assert not (workdir / "a.txt").exists() and (workdir / "b.txt").exists()

    second, channel = runtime_with(redis, workdir, model, ran)
    again = await second.decide(two, True, ADMIN, HERE, job="d2")  # the job delivered again
    assert again.accepted, again.message
    assert ran.ran == ["c1", "r1", "c2"]  # each once; the read (no side effects) ran again
    assert not (workdir / "b.txt").exists()
    assert replies(channel)[-1] == "all done"
    assert [await status(redis, "k1", i) for i in (one, two)] == ["consumed", "consumed"]
    assert await redis.get(f"{PREFIX}:{{k1}}:pending") is None


async def test_a_resume_killed_while_an_approved_call_ran_ends_it_unknown_and_goes_on(
    redis: aioredis.Redis, workdir: Path
) -> None:
    files(workdir, "a.txt", "b.txt", "keep.txt")
    model, ran = killed_at("c1", says("c1 may have run"), ran=True)
    first, channel = runtime_with(redis, workdir, model, ran)
    await first.run("k2", "clean up", ALICE, HERE, job="j1")
    one, two = (i.approval_id for i in channel.of(ApprovalRequested)[0].notice.items)
    await first.decide(one, True, ADMIN, HERE, job="d1")
    first.approved_calls._interrupted = _dies  # type: ignore[method-assign,assignment]
    try:  # killed while c1 runs: nothing records how it ended
        await first.decide(two, True, ADMIN, HERE, job="d2")
        raise AssertionError("the process should have died")
    except Crash:
        pass
    await redis.delete(f"{PREFIX}:worker:{first.worker_id}")  # its liveness mark lapses
    assert await status(redis, "k2", one) == "executing"

    second, channel = runtime_with(redis, workdir, model, ran)
    again = await second.decide(two, True, ADMIN, HERE, job="d2")
    assert again.accepted, again.message
    assert ran.ran == ["c1", "r1", "c2"]  # c1 is never run again; the rest goes on
    assert [await status(redis, "k2", i) for i in (one, two)] == ["outcome_unknown", "consumed"]
    history = await second.history.load("k2")
    answers = [m.tool_call_id for m in history if m.role == "tool"]
    assert answers == ["c1", "r1", "c2"]  # one answer each, in order


async def _dies(*_: object) -> None:
    return None


async def test_a_repeated_call_of_the_batch_is_answered_by_the_one_it_repeats(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt", "b.txt")
    twice = [("c1", "bash", {"command": "rm a.txt"}), ("c2", "bash", {"command": "rm a.txt"})]
    fake_openai.script = [calls(*twice, ("c3", "bash", {"command": "rm b.txt"})), reply("ok")]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    notice = await batch_of(runtime, channel, "b8")
    assert [i.arguments for i in notice.items] == ["rm a.txt", "rm b.txt"]  # asked once
    edit = await runtime.decide(notice.batch, True, ADMIN, HERE, edit='{"command": "ls"}')
    assert not edit.accepted and "by that call's id" in edit.message
    await runtime.decide(notice.batch, True, ADMIN, HERE)
    sent = dict(tools_sent(fake_openai))
    assert sent["c2"].startswith("(identical to call c1, which ran once)")
    assert not (workdir / "a.txt").exists() and not (workdir / "b.txt").exists()


async def test_a_resume_after_expiry_killed_mid_way_goes_on_when_released_again(
    redis: aioredis.Redis, workdir: Path
) -> None:
    files(workdir, "a.txt", "b.txt", "keep.txt")
    model, ran = killed_at("r1", says("a is gone"))
    first, channel = make_runtime(redis, workdir, model, liveness_ttl=2, timeout_s=0.2)
    first.loop.middlewares.append(ran)
    await first.run("k3", "clean up", ALICE, HERE, job="j1")
    one, two = (i.approval_id for i in channel.of(ApprovalRequested)[0].notice.items)
    await first.decide(one, True, ADMIN, HERE, job="d1")
    await asyncio.sleep(0.25)
    try:  # the sweeper's release carries the batch out, and dies at the read
        await first.sweep()
        raise AssertionError("the process should have died")
    except Crash:
        pass
    assert not (workdir / "a.txt").exists()

    second, channel = runtime_with(redis, workdir, model, ran)
    await second.release_held("k3")  # the release job, delivered again
    assert ran.ran == ["c1", "r1"]  # c1 once; the read again; c2 expired, never run
    assert (workdir / "b.txt").exists() and replies(channel)[-1] == "a is gone"
    assert [await status(redis, "k3", i) for i in (one, two)] == ["consumed", "expired"]
    assert await redis.get(f"{PREFIX}:{{k3}}:pending") is None


async def test_the_batch_notice_is_copied_where_the_policy_routes_it_and_decided_there(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt", "b.txt")
    document = PolicyDocument.model_validate(
        tomllib.loads('[approvals]\nnotify = ["slack:T1:C9"]\n')
    )
    batch = calls(("c1", "bash", {"command": "rm a.txt"}), ("c2", "bash", {"command": "rm b.txt"}))
    fake_openai.script = [batch, reply("done")]
    runtime, channel = make_runtime(
        redis, workdir, openai(fake_openai), document=document, approvers=[CAROL.key]
    )
    await runtime.run("b9", "clean up", ALICE, HERE)
    posted = [(c.id, e.notice) for c, e in channel.events if isinstance(e, ApprovalRequested)]
    assert [where for where, _ in posted] == [HERE.id, "slack:T1:C9"]  # one each: the batch
    assert all(len(notice.items) == 2 for _, notice in posted)
    there = ConversationRef(platform="slack", id="slack:T1:C9")
    decision = await runtime.decide(posted[1][1].batch, True, CAROL, there)
    assert decision.run is not None and decision.run.stop_reason is StopReason.FINAL
    updated = [c.id for c, e in channel.events if isinstance(e, ApprovalUpdated)]
    assert "slack:T1:C9" in updated and HERE.id in updated


async def test_the_operator_sees_batch_membership_and_decides_the_batch(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files(workdir, "a.txt", "b.txt")
    batch = calls(("c1", "bash", {"command": "rm a.txt"}), ("c2", "bash", {"command": "rm b.txt"}))
    fake_openai.script = [batch, reply("done")]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    await runtime.run(SESSION, "clean up", ALICE, THREAD)
    (requested,) = channel.of(ApprovalRequested)
    notice = requested.notice
    ids = [i.approval_id for i in notice.items]

    async def cli(verb: str, approval: str = "", **more: Any) -> str:
        out = io.StringIO()
        args = argparse.Namespace(verb=verb, id=approval, json=False, **more)
        assert await run_approvals_command(runtime.wing, args, out) == 0
        return out.getvalue()

    listed = await cli("list", status=None, conversation=None)
    assert "BATCH" in listed and listed.count(notice.batch) == 2
    assert f"(items: {', '.join(ids)})" in await cli("show", ids[1])
    assert await cli("show", notice.batch) == f"batch {notice.batch}: {' '.join(ids)}\n"
    operator = Operator(redis, runtime)  # queued for a worker, which decides each call
    assert await operator.carried_out("approve", notice.batch, capsys=capsys) == 0, operator.err
    assert operator.out.getvalue().startswith(f"Approval {ids[0]} approved by operator:")
    assert not (workdir / "a.txt").exists() and not (workdir / "b.txt").exists()


async def test_a_question_is_never_batched_it_is_asked_after_the_batch(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    files(workdir, "a.txt", "b.txt")
    ask = {"question": "Which environment?", "options": ["staging", "prod"]}
    fake_openai.script = [
        calls(
            ("c1", "bash", {"command": "rm a.txt"}),
            ("c2", "bash", {"command": "rm b.txt"}),
            ("q1", "clarify", ask),
        ),
        reply("prod it is"),
    ]
    registry = ToolRegistry([*default_registry().active(), ClarifyTool()])
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai), registry=registry)
    notice = await batch_of(runtime, channel, "b11")
    assert [i.tool for i in notice.items] == ["bash", "bash"]  # the question is not in it
    decided = await runtime.decide(notice.batch, True, ADMIN, HERE)
    assert decided.run is not None and decided.run.stop_reason is StopReason.APPROVAL_REQUIRED
    question = channel.of(ApprovalRequested)[-1].notice
    assert question.kind == "question" and not question.items
    answered = await runtime.decide(question.approval_id, Answer("2"), ALICE, HERE)
    assert answered.run is not None and answered.run.final_text == "prod it is"
    assert [cid for cid, _ in tools_sent(fake_openai)] == ["c1", "c2", "q1"]


@pytest.mark.parametrize("started", [True, False])
async def test_a_resume_killed_after_the_batch_never_runs_the_rest_of_the_turn_twice(
    redis: aioredis.Redis, workdir: Path, started: bool
) -> None:
    """Killed once the write after the batch ran (its outcome is unknown), or before it
    started (its mark says so: it runs on the retake)."""
    files(workdir, "a.txt", "b.txt")
    notes = ("w1", "write", '{"path": "notes.txt", "content": "x"}')
    more = ("w2", "write", '{"path": "more.txt", "content": "y"}')
    model = Scripted(asks(bash("c1", "rm a.txt"), bash("c2", "rm b.txt"), notes, more))
    model.steps.append(says("written"))
    ran = Calls(crash=["w2"]) if started else Calls(before=["w2"])
    first, channel = runtime_with(redis, workdir, model, ran)
    await first.run("k4", "clean up", ALICE, HERE, job="j1")
    notice = channel.of(ApprovalRequested)[0].notice
    await first.decide(notice.items[0].approval_id, True, ADMIN, HERE, job="d1")
    try:  # dies at the second write after the batch
        await first.decide(notice.items[1].approval_id, True, ADMIN, HERE, job="d2")
        raise AssertionError("the process should have died")
    except Crash:
        pass

    second, channel = runtime_with(redis, workdir, model, ran)
    again = await second.decide(notice.items[1].approval_id, True, ADMIN, HERE, job="d2")
    assert again.accepted, again.message
    assert ran.ran == ["c1", "c2", "w1", "w2"]  # each once
    answers = [m for m in await second.history.load("k4") if m.role == "tool"]
    assert [m.tool_call_id for m in answers] == ["c1", "c2", "w1", "w2"]
    assert answers[-1].content.startswith("outcome unknown") is started
    assert (workdir / "more.txt").exists()
    assert replies(channel)[-1] == "written"
