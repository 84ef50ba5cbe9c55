"""The slow tier of tests/component/test_approval_flow.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from runtime.channel import ApprovalUpdated
from runtime.models import (
    ToolMessage,
)
from tests.component.test_approval_flow import status_of, suspend_rm


@pytest.mark.e2e  # waits out timers or runs processes: the slow tier
async def test_sweeper_expires_overdue_approvals(redis: aioredis.Redis, workdir: Path) -> None:
    runtime, channel, approval_id = await suspend_rm(redis, workdir, timeout_s=1.5)
    assert await runtime.sweep() == 0  # not yet due
    await asyncio.sleep(1.6)
    assert await runtime.sweep() == 1
    assert await status_of(redis, "s1", approval_id) == "expired"
    assert channel.of(ApprovalUpdated)[-1].notice.status == "expired"
    history = await runtime.history.load("s1")
    assert isinstance(history[-1], ToolMessage) and "expired" in history[-1].content
