"""The N-person rule on a real Redis: a call the policy marks needs N distinct approvers, the
requester never counts, the same person twice counts once, and two approvals at once from two
processes run the call exactly once."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import redis.asyncio as aioredis

from adapters.dispatch import dispatch
from adapters.slack.blocks import approval_blocks
from runtime.agent import Runtime
from runtime.approval.models import ApprovalStatus
from runtime.channel import ApprovalUpdated
from runtime.models import Actor, StopReason
from runtime.policy.model import PolicyDocument
from runtime.providers.demo import DemoProvider
from tests.support import ALICE, HERE, RecordingChannel, make_runtime

CAROL = Actor(platform="slack", user_id="UCAROL")
DAVE = Actor(platform="slack", user_id="UDAVE")
POLICY = """
[approvals]
quorum_tools = { bash = 2 }
quorum_reasons = { "deletes files" = 3 }
"""


def quorum_runtime(redis: aioredis.Redis, workdir: Path) -> tuple[Runtime, RecordingChannel]:
    document = PolicyDocument.model_validate(tomllib.loads(POLICY))
    approvers = [CAROL.key, DAVE.key, ALICE.key]
    return make_runtime(
        redis,
        workdir,
        DemoProvider(),
        document=document,
        approvers=approvers,
        requester_may_approve=True,
    )


async def ask(runtime: Runtime, session: str, command: str) -> str:
    result = await runtime.run(session, f"run: {command}", ALICE, HERE)
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED and result.approval_id
    return result.approval_id


async def test_a_call_runs_only_once_enough_distinct_people_approved(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "a.txt").write_text("a")
    runtime, channel = quorum_runtime(redis, workdir)
    approval = await ask(runtime, "s1", "cp a.txt b.txt")  # bash: 2 approvers

    first = await runtime.decide(approval, True, CAROL, HERE)
    assert first.accepted and first.run is None
    assert first.message == f"Approval {approval}: 1 of 2 approvals; 1 more approver needed."
    assert not (workdir / "b.txt").exists()
    (update,) = channel.of(ApprovalUpdated)
    assert update.notice.approved_by == (CAROL.key,) and update.notice.quorum == 2

    again = await runtime.decide(approval, True, CAROL, HERE)
    assert not again.accepted and "not you again" in again.message
    own = await runtime.decide(approval, True, ALICE, HERE)  # may approve her own, but not count
    assert not own.accepted and "besides the one who asked for it" in own.message
    assert not (workdir / "b.txt").exists()

    second = await runtime.decide(approval, True, DAVE, HERE)
    assert second.accepted and second.run is not None
    assert (workdir / "b.txt").exists()
    loaded = await runtime.approvals.load(approval)
    assert loaded is not None
    assert loaded[0].status is ApprovalStatus.CONSUMED
    assert loaded[0].decided_by == f"{CAROL.key}, {DAVE.key}"


async def test_a_risk_reason_can_ask_for_more_and_one_rejection_ends_it(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "a.txt").write_text("a")
    runtime, _ = quorum_runtime(redis, workdir)
    approval = await ask(runtime, "s1", "rm a.txt")  # "rm deletes files": 3
    loaded = await runtime.approvals.load(approval)
    assert loaded is not None and loaded[0].quorum == 3
    assert (await runtime.decide(approval, True, CAROL, HERE)).accepted
    rejected = await runtime.decide(approval, False, DAVE, HERE, reason="keep it")
    assert rejected.accepted and rejected.run is not None
    assert (workdir / "a.txt").exists()
    loaded = await runtime.approvals.load(approval)
    assert loaded is not None and loaded[0].status is ApprovalStatus.REJECTED


async def test_an_edit_never_lowers_the_approvers_a_call_needs(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """One approver alone once passed a two-person rule by editing `rm -f x` into a call the
    rule does not name: the edited call needs the larger quorum, counted afresh."""
    (workdir / "x").write_text("x")
    document = PolicyDocument.model_validate(
        tomllib.loads('[approvals]\nquorum_reasons = { "^rm " = 2 }\n')
    )
    runtime, channel = make_runtime(
        redis, workdir, DemoProvider(), document=document, approvers=[CAROL.key, DAVE.key]
    )
    approval = await ask(runtime, "s1", "rm -f x")
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    await dispatch(runtime, "s1", f"/approve {approval}", CAROL, HERE, say)
    edit = json.dumps({"command": "find . -name x -delete"})  # alone it needs one approver
    await dispatch(runtime, "s1", f"/approve {approval} edit {edit}", CAROL, HERE, say)
    assert said[-1] == f"Approval {approval}: 1 of 2 approvals; 1 more approver needed."
    assert (workdir / "x").exists()  # Carol's approval of the original does not count
    loaded = await runtime.approvals.load(approval)
    assert loaded is not None
    assert loaded[0].quorum == 2 and loaded[0].approved_by == [CAROL.key]
    assert loaded[0].status is ApprovalStatus.PENDING
    shown = json.dumps(approval_blocks(channel.of(ApprovalUpdated)[-1].notice))
    assert "1 of 2 approvals" in shown

    ran = await dispatch(runtime, "s1", f"/approve {approval}", DAVE, HERE, say)
    assert ran is not None and ran.stop_reason is StopReason.FINAL
    assert not (workdir / "x").exists()  # the second approver ran the edited call
