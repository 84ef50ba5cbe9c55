"""Decisions made outside a chat (`clawgate approvals approve|reject`): refused at once when
the record says so, else queued in the approval's session lane for a worker, which decides as
it does a click and answers on the request's reply list. No serve process here: the worker's
part is the job handler run on the queued job (the e2e tier runs real processes:
tests/e2e/test_decisions_from_anywhere.py)."""

from __future__ import annotations

import argparse
import asyncio
import io
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.jobs import JobHandler
from adapters.router import Router
from bot.cli_approvals import FAILED, QUEUED, REFUSED, run_approvals_command, through_workers
from runtime.agent import Runtime
from runtime.approval.models import ApprovalRecord
from runtime.models import Actor, ConversationRef
from runtime.providers.demo import DemoProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.queue.inbound import DecisionRequest, Inbound
from runtime.queue.inbox import Inbox
from runtime.queue.ingest import Ingest
from runtime.queue.remote import Replies, decision_request
from runtime.store.keys import Keys
from runtime.store.streams import entries
from tests.fake_openai import FakeOpenAI, calls, error
from tests.support import ADMIN, PREFIX, make_runtime

SESSION = "slack:T1:C1:1700000000.000100"
THREAD = ConversationRef(platform="slack", id="slack:T1:C1", thread="1700000000.000100")
ALICE = Actor(platform="slack", user_id="UALICE")


class Operator:
    """`clawgate approvals` as the operator runs it, its worker's side run on demand."""

    def __init__(self, redis: aioredis.Redis, runtime: Runtime) -> None:
        self.inbox = Inbox(redis, Keys(PREFIX))
        self.ingest = Ingest(self.inbox, runtime.approvals)
        self.replies = Replies(redis, Keys(PREFIX))
        self.runtime = runtime
        self.out = io.StringIO()
        self.err = ""
        self.as_actor: Actor | None = None  # a decider other than the operator

    async def deliver(self, record: ApprovalRecord, actor: Actor, request: DecisionRequest) -> int:
        actor = self.as_actor or actor
        return await through_workers(
            self.ingest, self.replies, record, actor, request, self.wait, self.timeout, self.out
        )

    async def decide(
        self,
        verb: str,
        approval_id: str,
        *reason: str,
        wait: bool = False,
        timeout: float = 5.0,
        always: bool = False,
        capsys: pytest.CaptureFixture[str],
    ) -> int:
        self.wait, self.timeout = wait, timeout
        args = argparse.Namespace(verb=verb, id=approval_id, always=always, reason=list(reason))
        code = await run_approvals_command(self.runtime.wing, args, self.out, self.deliver)
        self.err = capsys.readouterr().err
        return code

    async def carried_out(
        self,
        verb: str,
        approval_id: str,
        *reason: str,
        wait: bool = False,
        again: bool = False,
        always: bool = False,
        capsys: pytest.CaptureFixture[str],
    ) -> int:
        """Decide, then, once the decision is queued in the session's lane (nothing ran in
        the deciding process), let a worker carry it out; the command's exit code."""
        deciding = asyncio.create_task(
            self.decide(verb, approval_id, *reason, wait=wait, always=always, capsys=capsys)
        )
        while await self.inbox.head(SESSION) is None:
            await asyncio.sleep(0.01)
        await self.work(again)
        return await deciding

    async def work(self, again: bool = False) -> None:
        """A worker takes what was queued and handles it (as serve's does); `again`: and
        once more, as a worker that took it over after the first died before its ack."""
        await self.inbox.ensure_group()
        handle = JobHandler(self.runtime, Router())
        for job in await self.inbox.read("worker-1", 10, 50):
            await handle(job)
            if again:
                await handle(job)
            await self.inbox.ack(job)


async def asked(
    redis: aioredis.Redis, workdir: Path, admins: tuple[str, ...] = (ADMIN.key,)
) -> tuple[Runtime, Operator, str]:
    (workdir / "victim.txt").write_text("v")
    runtime, _ = make_runtime(redis, workdir, DemoProvider(), admins=admins)
    result = await runtime.run(SESSION, "run: rm victim.txt", ALICE, THREAD)
    assert result.approval_id is not None
    return runtime, Operator(redis, runtime), result.approval_id


async def refusals(runtime: Runtime) -> list[str]:
    entries = await runtime.audit.newest(50)
    return [e.fields["why"] for e in entries if e.event == "approval_refused"]


async def test_the_worker_runs_the_call_and_tells_each_step(
    redis: aioredis.Redis, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime, operator, approval_id = await asked(redis, workdir)
    code = await operator.carried_out("approve", approval_id, wait=True, capsys=capsys)
    assert code == 0, operator.err
    lines = operator.out.getvalue().splitlines()
    assert lines[0] == f"Approval {approval_id} approved by operator:{operator_login()}; " + (
        "a worker runs it."
    )
    assert lines[1:] == ["The call ran in a worker: completed.", "The run answered in slack:T1:C1."]
    assert not (workdir / "victim.txt").exists()
    record = await runtime.approvals.load(approval_id)
    assert record is not None and record[0].status.value == "consumed"
    assert record[0].decided_by == f"operator:{operator_login()}"


async def test_a_rejection_is_told_as_the_thread_got_it(
    redis: aioredis.Redis, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime, operator, approval_id = await asked(redis, workdir)
    code = await operator.carried_out(
        "reject", approval_id, "not", "today", wait=True, capsys=capsys
    )
    assert code == 0, operator.err
    lines = operator.out.getvalue().splitlines()
    assert lines[0].startswith(f"Approval {approval_id} rejected by operator:")
    assert lines[-1] == "The run answered in slack:T1:C1."
    assert (workdir / "victim.txt").exists()
    record = await runtime.approvals.load(approval_id)
    assert record is not None and record[0].reason == "not today"


async def test_an_unknown_id_is_refused_at_once_and_audited(
    redis: aioredis.Redis, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime, operator, _ = await asked(redis, workdir)
    assert await operator.decide("approve", "nosuchid", capsys=capsys) == REFUSED
    assert operator.err == "clawgate: unknown approval id 'nosuchid'\n"
    assert await operator.inbox.head(SESSION) is None  # nothing queued
    assert await refusals(runtime) == ["unknown_id"]


async def test_an_approval_decided_already_is_refused_at_once(
    redis: aioredis.Redis, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime, operator, approval_id = await asked(redis, workdir)
    assert (await runtime.decide(approval_id, False, ADMIN, THREAD)).accepted
    assert await operator.decide("approve", approval_id, capsys=capsys) == REFUSED
    assert operator.err == (
        f"clawgate: approval {approval_id} was already decided by {ADMIN.key} (rejected)\n"
    )
    assert await operator.inbox.head(SESSION) is None
    assert await refusals(runtime) == ["already_decided"]


async def test_a_refusal_by_the_worker_exits_1_with_its_reason(
    redis: aioredis.Redis, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A decider the conversation's policy leaves out (the web console will send people's
    decisions this way): the worker refuses, and says why."""
    runtime, operator, approval_id = await asked(redis, workdir, admins=())
    operator.as_actor = Actor(platform="slack", user_id="UEVE")
    code = await operator.carried_out("approve", approval_id, capsys=capsys)
    assert code == REFUSED
    assert operator.err.startswith(f"clawgate: You cannot decide approval {approval_id}: ")
    assert "not an approver" in operator.err
    assert (workdir / "victim.txt").exists()
    assert await refusals(runtime) == ["unauthorized"]


async def test_no_worker_within_the_timeout_leaves_the_decision_queued(
    redis: aioredis.Redis, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, operator, approval_id = await asked(redis, workdir)
    assert await operator.decide("approve", approval_id, timeout=0.1, capsys=capsys) == QUEUED
    assert "no worker took the decision within 0.1 s; it is queued" in operator.out.getvalue()
    assert (workdir / "victim.txt").exists()
    # Nothing is lost: the worker that comes later carries it out.
    (job,) = [Inbound.model_validate_json(p) for p in await queued(redis, operator)]
    assert job.kind == "decision" and job.approval_id == approval_id
    await operator.work()
    assert not (workdir / "victim.txt").exists()


async def test_a_decision_delivered_again_runs_its_call_once(
    redis: aioredis.Redis, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    result = await runtime.run(SESSION, "run: echo ran >> runs.txt", ALICE, THREAD)
    assert result.approval_id is not None
    operator = Operator(redis, runtime)
    code = await operator.carried_out(
        "approve", result.approval_id, wait=True, again=True, capsys=capsys
    )
    assert code == 0, operator.err
    assert (workdir / "runs.txt").read_text() == "ran\n"


async def test_with_wait_a_run_that_fails_after_the_call_exits_4(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logged = calls(("call_1", "bash", {"command": "echo ran >> runs.txt"}))
    fake_openai.script = [logged, error(500)]  # the run fails once the call ran
    url = fake_openai.base_url
    provider = OpenAIProvider("fake", api_key="sk-test", base_url=url, max_retries=0)
    runtime, _ = make_runtime(redis, workdir, provider)
    result = await runtime.run(SESSION, "log it", ALICE, THREAD)
    assert result.approval_id is not None
    operator = Operator(redis, runtime)
    code = await operator.carried_out("approve", result.approval_id, wait=True, capsys=capsys)
    assert code == FAILED
    lines = operator.out.getvalue().splitlines()
    assert lines[1] == "The call ran in a worker: completed."
    assert lines[2].startswith("The run failed (") and lines[2].endswith("); said in slack:T1:C1.")
    assert (workdir / "runs.txt").read_text() == "ran\n"


async def test_a_decision_given_up_by_the_workers_is_told_to_the_decider(
    redis: aioredis.Redis, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every worker that took it stopped while on it (five starts): the inbox drops the job,
    and the decider hears it rather than waiting in vain."""
    _, operator, approval_id = await asked(redis, workdir)
    deciding = asyncio.create_task(operator.decide("approve", approval_id, capsys=capsys))
    while await operator.inbox.head(SESSION) is None:
        await asyncio.sleep(0.01)
    await operator.inbox.ensure_group()
    (job,) = await operator.inbox.read("worker-1", 10, 50)
    await JobHandler(operator.runtime, Router()).dropped(job)
    assert await deciding == FAILED
    assert operator.out.getvalue() == (
        "The decision was given up: every worker that took it stopped while carrying it out. "
        f"`clawgate approvals show {approval_id}` says where the approval stands.\n"
    )


async def test_always_grants_calls_like_it_and_says_so(
    redis: aioredis.Redis, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime, operator, approval_id = await asked(redis, workdir)
    assert await operator.carried_out("approve", approval_id, always=True, capsys=capsys) == 0
    assert operator.out.getvalue().startswith(f"Approval {approval_id} approved by operator:")
    assert "Calls matching `bash rm` are now allowed in this conversation" in (
        operator.out.getvalue()
    )
    (grant,) = await runtime.approvals.grants.here(THREAD.id, SESSION)
    assert grant.by.startswith("operator:") and grant.approval == approval_id


async def test_an_edit_sent_from_outside_runs_as_edited(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, operator, approval_id = await asked(redis, workdir)
    loaded = await runtime.approvals.load(approval_id)
    assert loaded is not None
    edited = decision_request(True, edit='{"command": "echo edited >> runs.txt"}')
    actor = Actor(platform="operator", user_id="alice")
    sending = asyncio.create_task(
        through_workers(
            operator.ingest, operator.replies, loaded[0], actor, edited, True, 5.0, operator.out
        )
    )
    while await operator.inbox.head(SESSION) is None:
        await asyncio.sleep(0.01)
    await operator.work()
    assert await sending == 0
    assert (workdir / "runs.txt").read_text() == "edited\n"
    assert (workdir / "victim.txt").exists()


async def queued(redis: aioredis.Redis, operator: Operator) -> list[str]:
    return [fields["job"] for _, fields in entries(await redis.xrange(operator.inbox.streams[0]))]


def operator_login() -> str:
    import getpass  # noqa: PLC0415

    return getpass.getuser()
