"""The two-person rule across two real `clawgate serve` processes sharing one Redis: two
approvers click Approve at the same moment, each click landing on a different process. In
every trial the call runs exactly once, and only with both approvals; one approval alone
never runs it. (Both clicks are queued in the approval's session lane, so the processes take
them one after the other; DECIDE counts them atomically in Redis as well, which
tests/component/test_quorum.py races directly.)"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.slack.inbound import APPROVE_ONCE
from tests.conftest import free_port
from tests.e2e.test_worker_processes import CHANNEL, SECRET, Clawgate, serve_env, wait_ready
from tests.fake_slack import (
    TEAM_ID,
    Call,
    FakeSlack,
    block_action_body,
    event_body,
    mention_event,
    new_event_id,
    post_signed,
)

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

TRIALS = 200
AT_ONCE = 8  # trials in flight together, each in its own thread
ALICE, CAROL, DAVE = "U_ALICE", "U_CAROL", "U_DAVE"
POLICY = f"""
[approvals]
approvers = ["slack:{CAROL}", "slack:{DAVE}"]
quorum_tools = {{ bash = 2 }}
"""


@dataclass
class Pair:
    """Two serve processes (each with its in-process worker) and the fake Slack."""

    fake: FakeSlack
    urls: tuple[str, str]
    processes: tuple[Clawgate, Clawgate]
    prefix: str

    async def post(self, url: str, body: str) -> None:
        status, answer = await post_signed(f"{url}/slack/events", SECRET, body)
        assert status == 200, answer

    async def ask(self, tag: str, text: str = "") -> tuple[str, Call]:
        """A mention asking to append `tag` to runs.log (or saying `text`): (its thread, the
        approval notice)."""
        text = text or f"run: echo {tag} &gt;&gt; runs.log"
        event = mention_event(text, user=ALICE, channel=CHANNEL)
        await self.post(self.urls[0], event_body(event, event_id=new_event_id()))
        thread = str(event["ts"])

        def notice() -> Call | None:
            posts = self.fake.posts(CHANNEL, thread)
            return next((c for c in posts if c.is_notice), None)

        return thread, await self.fake.await_for(notice, 30, what=f"the notice of {tag}")

    async def approve(self, url: str, user: str, thread: str, notice: Call, approval: str) -> None:
        body = block_action_body(
            APPROVE_ONCE,
            approval,
            user=user,
            channel=CHANNEL,
            message_ts=str(notice.response["ts"]),
            thread_ts=thread,
            message_blocks=notice.params["blocks"],
        )
        await self.post(url, body)

    async def answered(self, thread: str, tag: str) -> None:
        def done() -> bool:
            texts = [str(c.params.get("text")) for c in self.fake.posts(CHANNEL, thread)]
            return "[exit code 0]" in texts

        await self.fake.await_for(done, 30, what=f"the answer of {tag}")


def approval_of(notice: Call) -> str:
    for block in notice.params["blocks"]:
        for element in block.get("elements", []):
            if element.get("action_id") == APPROVE_ONCE:
                return str(element["value"])
    raise AssertionError(f"no Approve button in {notice.params}")


@contextlib.asynccontextmanager
async def serving_pair(
    redis_url: str, workdir: Path, policy_text: str = POLICY, **more: str
) -> AsyncIterator[Pair]:
    """Two serve processes under the policy `policy_text`, `more` in their environment."""
    policy = workdir.parent / "quorum.toml"
    policy.write_text(policy_text)
    async with FakeSlack() as fake:
        ports = free_port(), free_port()
        env = serve_env(fake, redis_url, workdir, ports[0], CLAWGATE_POLICY_FILE=str(policy))
        env |= more
        first = await Clawgate.start("serve", env, workdir)
        second = await Clawgate.start("serve", {**env, "CLAWGATE_PORT": str(ports[1])}, workdir)
        try:
            urls = (f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}")
            await asyncio.gather(*(wait_ready(url) for url in urls))
            yield Pair(fake, urls, (first, second), env["CLAWGATE_REDIS_PREFIX"])
        finally:
            await asyncio.gather(first.stop(), second.stop())


@pytest.fixture
async def pair(redis_url: str, workdir: Path) -> AsyncIterator[Pair]:
    async with serving_pair(redis_url, workdir) as serving:
        yield serving


def runs(workdir: Path) -> list[str]:
    log = workdir / "runs.log"
    return log.read_text().split() if log.exists() else []


async def test_two_approvals_clicked_at_once_on_two_processes_run_the_call_exactly_once(
    pair: Pair, workdir: Path, redis: aioredis.Redis
) -> None:
    slots = asyncio.Semaphore(AT_ONCE)
    approvals: dict[str, str] = {}

    async def trial(n: int) -> None:
        tag = f"t{n}"
        async with slots:
            thread, notice = await pair.ask(tag)
            approvals[tag] = approval = approval_of(notice)
            # The two clicks, at once, each on a different process (which one gets which
            # alternates from trial to trial).
            urls = pair.urls if n % 2 else pair.urls[::-1]
            await asyncio.gather(
                pair.approve(urls[0], CAROL, thread, notice, approval),
                pair.approve(urls[1], DAVE, thread, notice, approval),
            )
            await pair.answered(thread, tag)

    await asyncio.gather(*(trial(n) for n in range(TRIALS)))
    await asyncio.sleep(1.0)  # anything that would run a second time has had its chance

    ran = runs(workdir)
    assert sorted(ran) == sorted(f"t{n}" for n in range(TRIALS))  # each exactly once
    for tag, approval in approvals.items():
        session = f"slack:{TEAM_ID}:{CHANNEL}:"  # the thread's session, found by the index
        key = str(await redis.get(f"{pair.prefix}:approval-session:{approval}"))
        assert key.startswith(session), (tag, key)
        record = await redis.hgetall(f"{pair.prefix}:{{{key}}}:approval:{approval}")
        assert str(record["status"]) == "consumed", (tag, record)
        approvers = str(record["approved_by"]).split(",")
        assert sorted(approvers) == [f"slack:{CAROL}", f"slack:{DAVE}"]
    for process in pair.processes:
        assert "Traceback" not in process.stderr, process.stderr
        assert "run stopped (final)" in process.stderr  # both processes ran approved calls


async def test_one_approval_alone_never_runs_the_call(pair: Pair, workdir: Path) -> None:
    thread, notice = await pair.ask("lonely")
    approval = approval_of(notice)
    await pair.approve(pair.urls[0], CAROL, thread, notice, approval)
    await pair.approve(pair.urls[1], CAROL, thread, notice, approval)  # the same person again

    def counted() -> Any:
        message = pair.fake.message(CHANNEL, str(notice.response["ts"]))
        text = str(message.blocks) if message is not None else ""
        return "1 of 2 approvals" in text

    await pair.fake.await_for(counted, 30, what="the notice to show 1 of 2")
    await asyncio.sleep(1.0)
    assert runs(workdir) == []
    await pair.approve(pair.urls[1], DAVE, thread, notice, approval)
    await pair.answered(thread, "lonely")
    assert runs(workdir) == ["lonely"]
