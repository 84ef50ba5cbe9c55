"""The slow tier of tests/component/test_reminders.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from runtime.audit import AuditLog
from runtime.channel import Notice
from runtime.models import StopReason
from runtime.policy.model import PolicyDocument
from runtime.providers.demo import DemoProvider
from runtime.store.keys import Keys
from tests.component.test_reminders import BOB, CAROL, POLICY
from tests.support import ALICE, HERE, PREFIX, make_runtime


@pytest.mark.e2e  # waits out timers or runs processes: the slow tier
async def test_a_request_nobody_decides_is_brought_up_then_escalated(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "victim.txt").write_text("v")
    document = PolicyDocument.model_validate(tomllib.loads(POLICY))
    runtime, channel = make_runtime(
        redis, workdir, DemoProvider(), document=document, approvers=[CAROL.key]
    )
    result = await runtime.run("s1", "run: rm victim.txt", ALICE, HERE)
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED and result.approval_id
    approval = result.approval_id

    def told(word: str) -> list[tuple[str, str]]:
        notices = [(c.id, e.text) for c, e in channel.events if isinstance(e, Notice)]
        return [(where, text) for where, text in notices if word in text]

    await runtime.sweep()
    assert told("Reminder") == []  # not yet
    refused = await runtime.decide(approval, True, BOB, HERE)
    assert not refused.accepted and "not an approver" in refused.message

    await asyncio.sleep(0.35)
    await runtime.sweep()
    await runtime.sweep()  # once, whoever sweeps how often
    reminders = told("Reminder")
    assert [where for where, _ in reminders] == [HERE.id, "slack:T1:C9"]
    assert f"approval {approval} (bash, asked in {HERE.id}) still waits" in reminders[0][1]
    assert not (await runtime.decide(approval, True, BOB, HERE)).accepted  # not escalated yet

    await asyncio.sleep(0.5)
    await runtime.sweep()
    (escalation, _) = told("may decide it too")
    assert "now slack:UBOB may decide it too" in escalation[1]
    decision = await runtime.decide(approval, True, BOB, HERE)
    assert decision.accepted and not (workdir / "victim.txt").exists()
    events = [e.event for e in await AuditLog(redis, Keys(PREFIX)).newest(50)]
    assert events.count("approval_reminded") == 1 and events.count("approval_escalated") == 1
    await asyncio.sleep(0.1)
    await runtime.sweep()
    assert len(told("Reminder")) == 2 and len(told("may decide it too")) == 2  # nothing more
