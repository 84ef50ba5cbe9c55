"""The bash tool: workdir, scrubbed environment, output cap, and killing the whole group.

These run the tool uncontained (CLAWGATE_SANDBOX=off) so that the host sees the pids the
commands print; the sandbox itself is tested in test_sandbox.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from pathlib import Path

import pytest

from runtime.tools.base import ToolContext, ToolOutput
from runtime.tools.bash import BashArgs, BashTool
from runtime.tools.sandbox import Access, Sandbox, SandboxMode

GUARD = 15.0  # seconds: a broken kill makes the test fail instead of hanging
UNCONTAINED = Sandbox(SandboxMode.OFF)


@pytest.fixture
def ctx(workdir: Path) -> ToolContext:
    return ToolContext(session="t", workdir=workdir)


async def bash(
    ctx: ToolContext, command: str, tool: BashTool | None = None, timeout: float | None = None
) -> ToolOutput:
    tool = tool or BashTool(sandbox=UNCONTAINED)
    return await asyncio.wait_for(tool.run(BashArgs(command=command, timeout=timeout), ctx), GUARD)


def is_dead(pid: int) -> bool:
    """Gone, or a zombie waiting to be reaped: either way it runs no more."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # pid was reused by someone else's process
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    # The state follows the parenthesised command name, which may itself hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def wait_dead(pid: int, seconds: float = 5.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if is_dead(pid):
            return True
        await asyncio.sleep(0.05)
    return is_dead(pid)


async def wait_for_pid_file(path: Path, seconds: float = 10.0) -> int:
    for _ in range(int(seconds / 0.02)):
        text = path.read_text().strip() if path.exists() else ""
        if text.isdigit():
            return int(text)
        await asyncio.sleep(0.02)
    pytest.fail(f"{path.name} was never written")


def read_pid(path: Path) -> int:
    text = path.read_text().strip()
    assert text.isdigit(), f"{path.name} holds {text!r}"
    return int(text)


def kill_quietly(pid: int) -> None:
    """Clean up after a failing test so a stray sleep does not outlive it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


async def test_runs_in_workdir(ctx: ToolContext, workdir: Path) -> None:
    out = await bash(ctx, "pwd")
    assert out.text.splitlines()[0] == str(workdir.resolve())
    assert "[exit code 0]" in out.text


async def test_exit_code_reported(ctx: ToolContext) -> None:
    out = await bash(ctx, "echo hi; exit 3")
    assert out.text.startswith("hi\n")
    assert "[exit code 3]" in out.text
    assert out.display is not None
    assert "exit 3" in out.display


async def test_stderr_captured(ctx: ToolContext) -> None:
    out = await bash(ctx, "echo to-out; echo to-err >&2; exit 1")
    assert "to-out" in out.text
    assert "to-err" in out.text
    assert "[exit code 1]" in out.text


async def test_environment_scrubbed(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret-sentinel")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-sentinel")
    out = await bash(ctx, "env; ls / >/dev/null && echo path-works")
    assert "secret-sentinel" not in out.text
    assert "SLACK_BOT_TOKEN" not in out.text
    assert "OPENAI_API_KEY" not in out.text
    assert "path-works" in out.text
    assert re.search(r"^PATH=", out.text, re.MULTILINE)
    assert "[exit code 0]" in out.text


async def test_home_is_workdir(ctx: ToolContext, workdir: Path) -> None:
    out = await bash(ctx, 'echo "$HOME"; cd ~ && pwd')
    lines = out.text.splitlines()
    assert lines[0] == str(workdir)
    assert lines[1] == str(workdir.resolve())


async def test_output_is_capped(ctx: ToolContext) -> None:
    tool = BashTool(output_limit=1024, sandbox=UNCONTAINED)
    out = await bash(ctx, "head -c 100000 /dev/zero | tr '\\0' a", tool=tool)
    body, _, _ = out.text.partition("\n[")
    assert set(body.strip()) == {"a"}
    assert len(body.encode()) <= 1024
    assert "[output cut at 1024 of 100000 bytes]" in out.text
    assert "[exit code 0]" in out.text
    assert len(out.text) < 1024 + 200


async def test_output_under_cap_not_cut(ctx: ToolContext) -> None:
    out = await bash(ctx, "printf 'abc'", tool=BashTool(output_limit=1024, sandbox=UNCONTAINED))
    assert out.text == "abc\n[exit code 0]"


async def test_cancellation_kills_process_group(ctx: ToolContext, workdir: Path) -> None:
    task = asyncio.create_task(
        BashTool(sandbox=UNCONTAINED).run(
            BashArgs(command="sleep 30 & echo $! > child.pid; sleep 30"), ctx
        )
    )
    pid = await wait_for_pid_file(workdir / "child.pid")
    try:
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, GUARD)
        assert await wait_dead(pid), f"background child {pid} survived cancellation"
    finally:
        kill_quietly(pid)


@pytest.mark.parametrize("ticks", range(8))
async def test_cancellation_while_the_process_is_made_kills_it_too(
    ctx: ToolContext, workdir: Path, ticks: int
) -> None:
    # Cancelled a few event-loop turns in: while bwrap/bash is being spawned or its pipe
    # connected, before the tool waits on it. The process may already run (on a loaded
    # machine it writes its pid before the loop resumes): it must not outlive the call.
    task = asyncio.create_task(
        BashTool(sandbox=UNCONTAINED).run(
            BashArgs(command="sleep 30 & echo $! > child.pid; sleep 30"), ctx
        )
    )
    for _ in range(ticks):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, GUARD)
    await asyncio.sleep(0.3)  # a bash that survived would write its child's pid by now
    pid_file = workdir / "child.pid"
    if pid_file.exists() and pid_file.read_text().strip().isdigit():
        pid = read_pid(pid_file)
        try:
            assert await wait_dead(pid), f"background child {pid} survived cancellation"
        finally:
            kill_quietly(pid)


async def test_background_children_killed_after_normal_exit(
    ctx: ToolContext, workdir: Path
) -> None:
    # The background sleep must not hold the output pipe open, or the call would wait for it.
    out = await bash(ctx, "sleep 30 >/dev/null 2>&1 & echo $! > bg.pid")
    pid = read_pid(workdir / "bg.pid")
    try:
        assert "[exit code 0]" in out.text
        assert await wait_dead(pid), f"background child {pid} outlived the command"
    finally:
        kill_quietly(pid)


async def test_background_child_holding_stdout_killed(ctx: ToolContext, workdir: Path) -> None:
    # The child inherits the output pipe; the call must still end when bash exits, not at
    # the timeout (asyncio's Process.wait() alone would wait for the pipe to close).
    out = await bash(
        ctx,
        "sleep 30 & echo $! > bg.pid; echo done",
        tool=BashTool(timeout=20, sandbox=UNCONTAINED),
    )
    pid = read_pid(workdir / "bg.pid")
    try:
        assert "done" in out.text
        assert "[exit code 0]" in out.text
        assert await wait_dead(pid)
    finally:
        kill_quietly(pid)


def test_summarize_is_one_short_line() -> None:
    tool = BashTool(sandbox=UNCONTAINED)
    assert tool.summarize(BashArgs(command="echo   a\n  b")) == "$ echo a b"
    summary = tool.summarize(BashArgs(command="x" * 200))
    assert len(summary) <= 2 + 80
    assert summary.endswith("…")


async def test_unapproved_git_runs_no_program_its_config_names(workdir: Path) -> None:
    """Defense in depth behind the sandbox's sanitized git config (test_sandbox.py): the
    environment of an unapproved command overrides git's program settings, whichever config
    file sets them. Uncontained here, so that a program that runs leaves its marker."""
    marks = workdir.parent / "marks"
    marks.mkdir()
    hooks = workdir.parent / "hooks"
    hooks.mkdir()
    (hooks / "post-index-change").write_text(f"#!/bin/sh\ntouch {marks}/hook\n")
    (hooks / "post-index-change").chmod(0o755)
    setup = (
        "git init -q && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && "
        f"git config core.fsmonitor 'touch {marks}/fsmonitor; false' && "
        f"git config core.hooksPath {hooks} && touch new"
    )
    approved = ToolContext(session="t", workdir=workdir, access=Access.APPROVED)
    assert "[exit code 0]" in (await bash(approved, setup)).text
    unapproved = ToolContext(session="t", workdir=workdir, access=Access.READ_ONLY)
    out = await bash(unapproved, "git status --short; git add new")
    assert "?? new" in out.text
    assert sorted(os.listdir(marks)) == []
    await bash(approved, "git rm -q --cached new; git status; git add new")
    assert sorted(os.listdir(marks)) == ["fsmonitor", "hook"]  # they are real
