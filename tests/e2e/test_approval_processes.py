"""Approvals across real OS processes: `clawgate chat` suspends, another process decides, a
process killed mid-execution never re-runs its call."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from runtime.channel import ApprovalUpdated, Reply
from runtime.models import ConversationRef
from runtime.providers.demo import DemoProvider
from tests.processes import CLAWGATE, chat, clean_env
from tests.support import ADMIN, PREFIX, make_runtime

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

ID_LINE = re.compile(r"id ([a-z0-9]{13}): /approve")
SESSION = "console:local"
ORIGIN = ConversationRef(platform="console", id=SESSION)


def approval_key(approval_id: str) -> str:
    return f"{PREFIX}:{{{SESSION}}}:approval:{approval_id}"


class ChatProcess:
    """`clawgate chat` driven line by line, as a person at a terminal would."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.output: list[str] = []

    @classmethod
    async def start(cls, workdir: Path, env: dict[str, str]) -> ChatProcess:
        proc = await asyncio.create_subprocess_exec(
            *CLAWGATE,
            "chat",
            cwd=workdir,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        return cls(proc)

    async def say(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def read_until(self, pattern: str) -> re.Match[str]:
        assert self.proc.stdout is not None
        while True:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout=30)
            if not raw:
                raise AssertionError(f"chat ended before {pattern!r}: {''.join(self.output)}")
            line = raw.decode()
            self.output.append(line)
            match = re.search(pattern, line)
            if match:
                return match

    async def finish(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        rest, _ = await asyncio.wait_for(self.proc.communicate(), timeout=30)
        assert self.proc.returncode == 0
        return "".join(self.output) + rest.decode()


@pytest.mark.parametrize("store", ["redis", "embedded"])
async def test_chat_waits_for_approve_and_reject(
    workdir: Path, redis_url: str, redis: aioredis.Redis, store: str
) -> None:
    (workdir / "victim.txt").write_text("v")
    (workdir / "keeper.txt").write_text("k")
    extra = {"REDIS_URL": redis_url, "CLAWGATE_REDIS_PREFIX": PREFIX} if store == "redis" else {}
    chat_proc = await ChatProcess.start(workdir, clean_env(**extra))

    await chat_proc.say("run: rm victim.txt")
    approval_id = (await chat_proc.read_until(ID_LINE.pattern)).group(1)
    assert (workdir / "victim.txt").exists()
    await chat_proc.say(f"/approve {approval_id}")
    await chat_proc.read_until(r"\[exit code 0\]")
    assert not (workdir / "victim.txt").exists()
    await chat_proc.say(f"/approve {approval_id}")
    await chat_proc.read_until("already")

    await chat_proc.say("run: rm keeper.txt")
    second = (await chat_proc.read_until(ID_LINE.pattern)).group(1)
    await chat_proc.say(f"/reject {second} we still need it")
    await chat_proc.read_until("rejected by console")
    out = await chat_proc.finish()

    assert (workdir / "keeper.txt").exists()
    assert f"[approval {approval_id} approved by console:" in out
    assert "we still need it" in out
    if store == "redis":
        assert await redis.hget(approval_key(approval_id), "status") == "consumed"
        assert await redis.hget(approval_key(second), "status") == "rejected"


async def test_approval_created_in_one_process_is_approved_from_another(
    workdir: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    (workdir / "victim.txt").write_text("v")
    key = "ops-1:" + "k" * 32  # the approving process makes the call's receipt with it
    env = clean_env(REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX=PREFIX, CLAWGATE_AUDIT_KEY=key)
    code, out, _ = await chat("run: rm victim.txt\n", workdir, env, "chat")
    assert code == 0
    match = ID_LINE.search(out)
    assert match, out
    approval_id = match.group(1)

    code, listed, _ = await chat("", workdir, env, "approvals", "list")
    assert code == 0 and approval_id in listed and "rm victim.txt" in listed
    assert listed.splitlines()[0].split() == [
        "ID",
        "STATUS",
        "TOOL",
        "CONVERSATION",
        "REQUESTER",
        "EXPIRES",
        "(UTC)",
        "BATCH",
        "ARGUMENTS",
    ]
    assert f"{SESSION}  console:" in listed.splitlines()[1]
    code, listed, _ = await chat("", workdir, env, "approvals", "list", "--json")
    (entry,) = json.loads(listed)
    assert entry["approval_id"] == approval_id and entry["status"] == "pending"
    assert entry["conversation"] == SESSION
    for filters, listed_here in (
        (["--conversation", "console"], True),
        (["--conversation", "console:local", "--status", "pending"], True),
        (["--conversation", "slack"], False),
        (["--conversation", "console:loc"], False),  # whole parts only, like scopes
        (["--status", "executing"], False),
    ):
        code, listed, _ = await chat("", workdir, env, "approvals", "list", *filters)
        assert code == 0 and (approval_id in listed) is listed_here, filters
    assert (workdir / "victim.txt").exists()

    code, out, err = await chat("", workdir, env, "approvals", "approve", approval_id)
    assert code == 0, err
    assert f"Approval {approval_id} approved." in out
    assert not (workdir / "victim.txt").exists()
    assert await redis.hget(approval_key(approval_id), "status") == "consumed"
    decider = str(await redis.hget(approval_key(approval_id), "decided_by"))
    assert decider.startswith("operator:")

    code, out, err = await chat("", workdir, env, "approvals", "approve", approval_id)
    assert code == 1 and not out
    assert (
        err.strip() == f"clawgate: approval {approval_id} was already decided by {decider} (done)"
    )

    code, shown, _ = await chat("", workdir, env, "approvals", "show", approval_id)
    assert code == 0
    assert re.search(r"^status: +consumed$", shown, re.M), shown
    assert re.search(rf"^decided_by: +{re.escape(decider)}$", shown, re.M), shown
    assert "audit  " in shown and "event=consumed" in shown
    code, as_json, _ = await chat("", workdir, env, "approvals", "show", approval_id, "--json")
    assert json.loads(as_json)["status"] == "consumed"
    receipt = json.loads(as_json)["receipt"]
    assert receipt["approval"] == approval_id and receipt["kid"] == "ops-1"
    assert f"clawgate audit receipt {receipt['id']}" in shown
    code, checked, _ = await chat("", workdir, env, "audit", "receipt", receipt["id"])
    assert code == 0 and checked.startswith(f"receipt {receipt['id']}: verified"), checked
    code, _, err = await chat("", workdir, env, "approvals", "show", "nosuchid")
    assert code == 1 and err.strip() == "clawgate: unknown approval id 'nosuchid'"


async def test_a_decision_from_the_shell_is_shown_in_the_waiting_chat(
    workdir: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    """The chat that asked is still open: a decision made with `clawgate approvals approve`
    (whose process runs the call) shows there, with the run's answer, and `/pending` in the
    chat no longer lists it."""
    (workdir / "victim.txt").write_text("v")
    env = clean_env(REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX=PREFIX)
    chat_proc = await ChatProcess.start(workdir, env)
    await chat_proc.say("run: rm victim.txt")
    approval_id = (await chat_proc.read_until(ID_LINE.pattern)).group(1)
    await asyncio.sleep(0.5)  # the chat follows its conversation by now

    code, out, err = await chat("", workdir, env, "approvals", "approve", approval_id)
    assert code == 0, err
    assert f"Approval {approval_id} approved." in out and "[exit code 0]" in out
    assert not (workdir / "victim.txt").exists()
    told = await chat_proc.read_until(rf"\[approval {approval_id} [a-z ]+ by operator:")
    assert told.group(0)
    await chat_proc.read_until(r"\[exit code 0\]")  # the answer of the run, resumed elsewhere
    await chat_proc.say("/pending")
    await chat_proc.read_until("No approvals are pending")
    out = await chat_proc.finish()
    assert out.count("[exit code 0]") == 1
    assert await redis.hget(approval_key(approval_id), "status") == "consumed"


async def test_process_killed_while_executing_is_never_rerun(
    workdir: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    env = clean_env(REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX=PREFIX, CLAWGATE_LIVENESS_TTL="1")
    command = "run: echo ran >> runs.txt; echo $$ > pid.txt; sleep 60"
    code, out, _ = await chat(command + "\n", workdir, env, "chat")
    match = ID_LINE.search(out)
    assert code == 0 and match, out
    approval_id = match.group(1)

    approver = await asyncio.create_subprocess_exec(
        *CLAWGATE,
        "approvals",
        "approve",
        approval_id,
        cwd=workdir,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            if (workdir / "pid.txt").exists():
                break
            await asyncio.sleep(0.05)
        assert await redis.hget(approval_key(approval_id), "status") == "executing"
        approver.send_signal(signal.SIGKILL)
        await approver.wait()
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.killpg(int((workdir / "pid.txt").read_text()), signal.SIGKILL)

    runtime, channel = make_runtime(redis, workdir, DemoProvider())
    for _ in range(100):  # the dead process's liveness key lapses after 1 s
        if await runtime.sweep():
            break
        await asyncio.sleep(0.1)
    assert await redis.hget(approval_key(approval_id), "status") == "outcome_unknown"
    assert channel.of(ApprovalUpdated)[-1].notice.status == "outcome_unknown"
    assert "will not be run again" in channel.of(Reply)[-1].text
    again = await runtime.decide(approval_id, True, ADMIN, ORIGIN)
    assert not again.accepted and "outcome unknown" in again.message
    assert await runtime.sweep() == 0
    assert (workdir / "runs.txt").read_text() == "ran\n"  # ran once, never again
