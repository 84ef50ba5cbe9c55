"""The slow tier of tests/component/test_tool_bash.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.tools.base import ToolContext
from runtime.tools.bash import BashTool
from tests.component import test_tool_bash as _tool_bash
from tests.component.test_tool_bash import (
    UNCONTAINED,
    bash,
    kill_quietly,
    read_pid,
    wait_dead,
)

# Fixtures of the fast tier's module, shared here.
ctx = _tool_bash.ctx


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_timeout_kills_process_group(ctx: ToolContext, workdir: Path) -> None:
    tool = BashTool(timeout=1, sandbox=UNCONTAINED)
    out = await bash(ctx, "sleep 30 & echo $! > child.pid; sleep 30", tool=tool)
    pid = read_pid(workdir / "child.pid")
    try:
        assert "timed out" in out.text
        assert "[exit code" not in out.text
        assert await wait_dead(pid), f"background child {pid} survived the timeout"
    finally:
        kill_quietly(pid)


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_child_escaping_the_group_cannot_hold_the_call_open(
    ctx: ToolContext, workdir: Path
) -> None:
    # setsid leaves our process group, so the group kill misses it; it still holds the pipe.
    out = await bash(
        ctx,
        "setsid sh -c 'echo $$ > esc.tmp; mv esc.tmp esc.pid; exec sleep 60' & "
        "while [ ! -e esc.pid ]; do sleep 0.01; done; echo started",
        tool=BashTool(timeout=20, sandbox=UNCONTAINED),
    )
    pid = read_pid(workdir / "esc.pid")
    try:
        assert "started" in out.text
        assert "[exit code 0]" in out.text
        assert "still held the output" in out.text
    finally:
        kill_quietly(pid)


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_per_call_timeout_capped_by_tool_timeout(ctx: ToolContext) -> None:
    tool = BashTool(timeout=1, sandbox=UNCONTAINED)
    out = await bash(ctx, "sleep 30", tool=tool, timeout=600)
    assert "timed out after 1s" in out.text


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_per_call_timeout_may_be_shorter(ctx: ToolContext) -> None:
    tool = BashTool(timeout=600, sandbox=UNCONTAINED)
    out = await bash(ctx, "sleep 30", tool=tool, timeout=0.5)
    assert "timed out after 0.5s" in out.text
    assert out.error_code == "timeout"  # what traces and the audit trail record
