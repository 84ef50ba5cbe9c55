"""Calls a dead process left without a result, on a real Redis: one that cannot have had an
effect (never started, a read, a command in the read-only sandbox) runs again when the run is
retaken, its result once in history; one that may have changed something (a write, an approved
or uncontained command) ends "outcome unknown" (runtime/unfinished.py). The process dies as in
tests/component/test_retake.py: `Crash` raised once the call's tool ran, or before it starts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from runtime.agent import Runtime
from runtime.audit import AuditLog
from runtime.channel import ApprovalRequested
from runtime.loop import INTERRUPTED, OUTCOME_UNKNOWN
from runtime.models import StopReason
from runtime.store.keys import Keys
from runtime.tools.clarify import ClarifyTool
from runtime.tools.files import ReadTool
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import NetworkAccess, Sandbox, SandboxMode, probe
from tests.component.test_retake import (
    Calls,
    Crash,
    Scripted,
    asks,
    bash,
    history_of,
    replies,
    says,
    suspended,
    tool_answers,
    write,
)
from tests.support import (
    ADMIN,
    ALICE,
    HERE,
    PREFIX,
    RecordingChannel,
    make_runtime,
    working_sandbox,
)


def read(call_id: str, path: str) -> tuple[str, str, str]:
    return call_id, "read", f'{{"path": "{path}"}}'


def runtime_in(
    redis: aioredis.Redis, workdir: Path, model: Scripted, calls: Calls, sandbox: Sandbox
) -> tuple[Runtime, RecordingChannel]:
    runtime, channel = make_runtime(redis, workdir, model, liveness_ttl=2, sandbox=sandbox)
    runtime.loop.middlewares.append(calls)
    return runtime, channel


async def retaken(
    redis: aioredis.Redis, workdir: Path, model: Scripted, calls: Calls, sandbox: Sandbox
) -> tuple[Runtime, RecordingChannel]:
    """Run job j1 of session s1 until the process dies (`calls` says where), then again in
    another runtime, as a worker taking the job over does."""
    first, _ = runtime_in(redis, workdir, model, calls, sandbox)
    with pytest.raises(Crash):
        await first.run("s1", "go", ALICE, HERE, job="j1")
    second, channel = runtime_in(redis, workdir, model, calls, sandbox)
    result = await second.run("s1", "go", ALICE, HERE, job="j1")
    assert result.stop_reason is StopReason.FINAL, result
    return second, channel


async def audited(redis: aioredis.Redis, event: str) -> Counter[str]:
    """The kinds of the calls the audit trail says were run again, or ended unknown."""
    trail = AuditLog(redis, Keys(PREFIX)).since(0)
    return Counter([entry.fields["kind"] async for entry in trail if entry.event == event])


def retaken_calls(result: str) -> float:
    """`clawgate_retaken_calls_total` of one result: what the outcome_unknown alert reads."""
    return REGISTRY.get_sample_value("clawgate_retaken_calls_total", {"result": result}) or 0


async def test_a_read_and_a_sandboxed_command_whose_process_died_run_again_once_in_history(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "notes.txt").write_text("the notes\n")
    model = Scripted(asks(bash("b1", "cat notes.txt"), read("r2", "notes.txt")), says("done"))
    calls = Calls(crash=["r2"])  # the read ran; its process died before its result was saved
    again, unknown = retaken_calls("run_again"), retaken_calls("outcome_unknown")
    second, channel = await retaken(redis, workdir, model, calls, working_sandbox())

    assert calls.ran == ["b1", "r2", "b1", "r2"]  # both again: neither can have changed a thing
    history = await history_of(second, "s1")
    answers = [m for m in history if m.role == "tool"]
    assert [m.tool_call_id for m in answers] == ["b1", "r2"]  # each result once
    assert all("the notes" in m.content for m in answers)
    assert replies(channel) == ["done"] and model.asked == 2
    assert await audited(redis, "call_run_again") == {"bash-sandboxed": 1, "read": 1}
    assert not await audited(redis, "call_outcome_unknown")
    assert (retaken_calls("run_again"), retaken_calls("outcome_unknown")) == (again + 2, unknown)


@pytest.mark.parametrize(
    ("network", "kind"),
    [(None, "bash-uncontained"), (NetworkAccess.ALWAYS, "bash-networked")],
    ids=["no-sandbox", "sandbox-with-network"],
)
async def test_an_unapproved_command_that_may_have_had_effects_stays_unknown(
    redis: aioredis.Redis, workdir: Path, network: NetworkAccess | None, kind: str
) -> None:
    sandbox = probe(SandboxMode.OFF) if network is None else working_sandbox(network)
    model = Scripted(asks(bash("b1", "ls")), says("it may have run"))
    calls = Calls(crash=["b1"])
    second, channel = await retaken(redis, workdir, model, calls, sandbox)

    assert calls.ran == ["b1"]
    assert tool_answers(await history_of(second, "s1"))["b1"] == OUTCOME_UNKNOWN
    assert replies(channel) == ["it may have run"]
    assert await audited(redis, "call_outcome_unknown") == {kind: 1}


async def test_a_write_that_died_mid_call_stays_unknown_and_the_rest_is_not_run(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(asks(write("w1", "a.txt", "1"), read("r2", "a.txt")), says("stopped"))
    calls = Calls(crash=["w1"])
    unknown = retaken_calls("outcome_unknown")
    second, _ = await retaken(redis, workdir, model, calls, working_sandbox())

    assert calls.ran == ["w1"]
    answers = tool_answers(await history_of(second, "s1"))
    assert answers == {"w1": OUTCOME_UNKNOWN, "r2": INTERRUPTED}
    assert await audited(redis, "call_outcome_unknown") == {"write": 1}
    assert retaken_calls("outcome_unknown") == unknown + 1


async def test_a_call_whose_process_died_before_it_started_runs_on_the_retake(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(asks(write("w1", "a.txt", "1"), write("w2", "b.txt", "2")), says("done"))
    calls = Calls(before=["w2"])  # w1's result saved; w2 never reached its tool
    second, channel = await retaken(redis, workdir, model, calls, working_sandbox())

    assert calls.ran == ["w1", "w2"]  # each once
    assert (workdir / "b.txt").read_text() == "2"
    answers = tool_answers(await history_of(second, "s1"))
    assert list(answers) == ["w1", "w2"] and OUTCOME_UNKNOWN not in answers.values()
    assert replies(channel) == ["done"]
    assert await audited(redis, "call_run_again") == {"not-started": 1}


async def test_a_sandboxed_command_after_an_approved_one_runs_again_and_the_session_is_released(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """The rest of an approved call's batch: retaken by the deciding job, the read-only command
    that was running runs again, and only then does the session stop waiting."""
    (workdir / "notes.txt").write_text("the notes\n")
    model = Scripted(
        asks(bash("c1", "rm victim.txt"), bash("c2", "cat notes.txt")), says("removed"), says("hi")
    )
    calls = Calls(crash=["c2"])
    first, approval_id = await suspended(redis, workdir, model, calls)
    assert (await first.run("s1", "hello", ALICE, HERE, job="m1")).held
    with pytest.raises(Crash):
        await first.decide(approval_id, True, ADMIN, HERE, job="d1")

    second, channel = runtime_in(redis, workdir, model, calls, working_sandbox())
    assert (await second.decide(approval_id, True, ADMIN, HERE, job="d1")).accepted

    assert calls.ran == ["c1", "c2", "c2"]  # the approved call once, the read-only one again
    history = await history_of(second, "s1")
    assert [m.tool_call_id for m in history if m.role == "tool"] == ["c1", "c2"]
    assert replies(channel) == ["removed", "hi"]
    assert await redis.get(f"{PREFIX}:{{s1}}:pending") is None
    assert await redis.llen(f"{PREFIX}:{{s1}}:held") == 0


async def test_an_approved_command_that_died_mid_call_stays_unknown(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """It ran with the work dir writable: it may have changed something, so it is settled
    "outcome unknown" and never run again, whoever retakes the decision."""
    model = Scripted(asks(bash("c1", "rm victim.txt")), says("it may have run"))
    calls = Calls(crash=["c1"])
    first, approval_id = await suspended(redis, workdir, model, calls)
    with pytest.raises(Crash):
        await first.decide(approval_id, True, ADMIN, HERE, job="d1")

    second, channel = runtime_in(redis, workdir, model, calls, working_sandbox())
    assert (await second.decide(approval_id, True, ADMIN, HERE, job="d1")).accepted

    assert calls.ran == ["c1"] and not (workdir / "victim.txt").exists()
    assert tool_answers(await history_of(second, "s1"))["c1"].startswith("outcome unknown")
    assert replies(channel)[-1] == "it may have run"
    assert await audited(redis, "approval_outcome_unknown") == {"bash-approved": 1}


async def test_a_question_whose_process_died_before_it_was_stored_is_asked_again(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """A question is no effect: the clarify call never got its answer, so it is asked (once),
    the model not asked again and nothing "outcome unknown"."""
    question = '{"question": "Which one?", "options": ["staging", "prod"]}'
    model = Scripted(asks(("q1", "clarify", question)))
    tools = ToolRegistry([ReadTool(), ClarifyTool()])
    first, _ = make_runtime(redis, workdir, model, registry=tools)
    create = first.approvals.create

    async def dies(*args: Any, **kwargs: Any) -> Any:
        raise Crash

    first.approvals.create = dies  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await first.run("s1", "deploy it", ALICE, HERE, job="j1")
    first.approvals.create = create  # type: ignore[method-assign]

    second, channel = make_runtime(redis, workdir, model, registry=tools)
    result = await second.run("s1", "deploy it", ALICE, HERE, job="j1")

    assert result.stop_reason is StopReason.APPROVAL_REQUIRED and model.asked == 1
    (asked,) = channel.of(ApprovalRequested)
    assert asked.notice.approval_id == result.approval_id
    assert not tool_answers(await history_of(second, "s1"))  # answered by the requester only
    assert await audited(redis, "call_run_again") == {"not-started": 1}
