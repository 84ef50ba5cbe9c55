"""The slow tier of tests/component/test_quorum.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from runtime.approval.models import ApprovalStatus
from tests.component.test_quorum import CAROL, DAVE, ask, quorum_runtime
from tests.support import HERE


@pytest.mark.e2e  # 200 trials
async def test_two_approvals_at_once_from_two_processes_run_the_call_exactly_once(
    redis: aioredis.Redis, workdir: Path
) -> None:
    one, _ = quorum_runtime(redis, workdir)
    two, _ = quorum_runtime(redis, workdir)
    for trial in range(200):
        (workdir / "src.txt").write_text(str(trial))
        approval = await ask(one, f"s{trial}", f"cp src.txt out{trial}.txt")
        first, second = await asyncio.gather(
            one.decide(approval, True, CAROL, HERE), two.decide(approval, True, DAVE, HERE)
        )
        assert {first.run is None, second.run is None} == {True, False}, trial
        loaded = await one.approvals.load(approval)
        assert loaded is not None and loaded[0].status is ApprovalStatus.CONSUMED
        assert sorted(loaded[0].approved_by) == [CAROL.key, DAVE.key]
        assert (workdir / f"out{trial}.txt").read_text() == str(trial)
    consumed = [
        e
        for s in range(200)
        for e in await one.approvals.audit_entries(f"s{s}")
        if e["event"] == "consumed"
    ]
    assert len(consumed) == 200  # exactly one execution per approval
