"""A decision made with `clawgate approvals approve` from a shell that has only REDIS_URL (no
Slack settings, another work dir) is carried out by the serving worker: the call runs once in
the worker's work dir, the thread gets the answer and the notice its update, and `--wait`
prints the outcome. A serve process killed with SIGKILL before it took the decision loses
nothing: the next one carries it out, once."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.settings import CLUSTER_INBOX_PARTITIONS
from runtime.approval.store import ApprovalStore
from runtime.queue.inbox import Inbox
from runtime.store.keys import Keys
from tests.conftest import free_port
from tests.e2e.test_quorum_processes import approval_of
from tests.e2e.test_slack_serve import block_text, buttons
from tests.e2e.test_worker_processes import CHANNEL, SECRET, Clawgate, serve_env, wait_ready
from tests.fake_slack import TEAM_ID, Call, FakeSlack, event_body, mention_event, post_signed
from tests.processes import CLAWGATE, clean_env

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier


@dataclass
class Served:
    fake: FakeSlack
    env: dict[str, str]  # serve's
    url: str
    serve: Clawgate
    workdir: Path
    elsewhere: Path  # the operator's shell's work dir

    @property
    def prefix(self) -> str:
        return self.env["CLAWGATE_REDIS_PREFIX"]

    async def ask(self, command: str) -> tuple[str, Call]:
        """A mention asking to run `command` (escaped as Slack does): (its thread, the
        approval notice posted there)."""
        event = mention_event(f"run: {command}", channel=CHANNEL)
        status, answer = await post_signed(f"{self.url}/slack/events", SECRET, event_body(event))
        assert status == 200, answer
        thread = str(event["ts"])

        def notice() -> Call | None:
            return next((c for c in self.fake.posts(CHANNEL, thread) if c.is_notice), None)

        return thread, await self.fake.await_for(notice, 30, what="the approval notice")

    async def restart(self) -> None:
        self.serve = await Clawgate.start("serve", self.env, self.workdir)
        await wait_ready(self.url)

    def operator_env(self) -> dict[str, str]:
        """The operator's shell: Redis and the prefix, nothing of Slack or of the worker."""
        env = clean_env(REDIS_URL=self.env["REDIS_URL"], CLAWGATE_REDIS_PREFIX=self.prefix)
        return {k: v for k, v in env.items() if not k.startswith(("SLACK_", "FEISHU_"))}

    async def operator(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *CLAWGATE,
            "approvals",
            *args,
            cwd=self.elsewhere,
            env=self.operator_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

    async def answered(self, thread: str) -> list[str]:
        def done() -> list[str] | None:
            texts = [str(c.params.get("text")) for c in self.fake.posts(CHANNEL, thread)]
            return texts if "[exit code 0]" in texts else None

        return await self.fake.await_for(done, 30, what="the answer in the thread")


@pytest.fixture
async def served(redis_url: str, tmp_path: Path) -> AsyncIterator[Served]:
    workdir, elsewhere = tmp_path / "worker-dir", tmp_path / "operator-dir"
    workdir.mkdir()
    elsewhere.mkdir()
    async with FakeSlack() as fake:
        port = free_port()
        env = serve_env(fake, redis_url, workdir, port, CLAWGATE_LIVENESS_TTL="1")
        serve = await Clawgate.start("serve", env, workdir)
        url = f"http://127.0.0.1:{port}"
        await wait_ready(url)
        served = Served(fake, env, url, serve, workdir, elsewhere)
        try:
            yield served
        finally:
            await served.serve.stop()


async def finished(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_decision_from_a_bare_shell_runs_in_the_worker_and_answers_in_the_thread(
    served: Served,
) -> None:
    thread, notice = await served.ask("echo ran &gt;&gt; runs.log")
    approval = approval_of(notice)

    code, out, err = await finished(await served.operator("approve", approval, "--wait"))

    assert code == 0, err
    login = out.split("by operator:", 1)[1].split(";", 1)[0]
    assert out.splitlines() == [
        f"Approval {approval} approved by operator:{login}; a worker runs it.",
        "The call ran in a worker: completed.",
        f"The run answered in slack:{TEAM_ID}:{CHANNEL}.",
    ]
    # Run once, in the worker's work dir, not in the operator's.
    assert (served.workdir / "runs.log").read_text() == "ran\n"
    assert not (served.elsewhere / "runs.log").exists()
    texts = await served.answered(thread)
    assert texts.count("[exit code 0]") == 1
    updated = served.fake.message(CHANNEL, str(notice.response["ts"]))
    assert updated is not None and buttons(updated.blocks or []) == []
    assert f"Approved by operator:{login}" in block_text(updated.blocks)

    # Decided already: refused at once, from the record.
    code, out, err = await finished(await served.operator("approve", approval))
    assert code == 1 and not out
    assert err == f"clawgate: approval {approval} was already decided by operator:{login} " + (
        "(done)\n"
    )


async def test_a_worker_killed_before_it_took_the_decision_loses_nothing(
    served: Served, redis: aioredis.Redis
) -> None:
    thread, notice = await served.ask("echo ran &gt;&gt; runs.log")
    approval = approval_of(notice)
    served.serve.proc.kill()  # SIGKILL: no goodbye, no hand-back
    await served.serve.stop()

    deciding = await served.operator("approve", approval, "--wait", "--timeout", "60")
    keys = Keys(served.prefix)
    loaded = await ApprovalStore(redis, keys).load(approval)
    assert loaded is not None
    cluster = bool(os.environ.get("CLAWGATE_REDIS_CLUSTER"))
    inbox = Inbox(redis, keys, partitions=CLUSTER_INBOX_PARTITIONS if cluster else 1)
    for _ in range(300):  # queued in the approval's session lane, with no worker to take it
        if await inbox.head(loaded[0].session) is not None:
            break
        await asyncio.sleep(0.05)
    assert await inbox.head(loaded[0].session) is not None
    assert not (served.workdir / "runs.log").exists()

    await served.restart()
    code, out, err = await finished(deciding)

    assert code == 0, err
    assert f"Approval {approval} approved by operator:" in out
    assert out.splitlines()[-1] == f"The run answered in slack:{TEAM_ID}:{CHANNEL}."
    assert (served.workdir / "runs.log").read_text() == "ran\n"
    assert (await served.answered(thread)).count("[exit code 0]") == 1
    await asyncio.sleep(1)  # nothing runs it again
    assert (served.workdir / "runs.log").read_text() == "ran\n"


async def test_no_worker_within_the_timeout_says_queued_and_exits_3(served: Served) -> None:
    _, notice = await served.ask("echo ran &gt;&gt; runs.log")
    approval = approval_of(notice)
    served.serve.proc.kill()
    await served.serve.stop()

    code, out, _ = await finished(await served.operator("reject", approval, "--timeout", "0.5"))

    assert code == 3
    assert out == (
        f"Approval {approval}: no worker took the decision within 0.5 s; it is queued and "
        "will be carried out when a worker runs (nothing is lost).\n"
    )
