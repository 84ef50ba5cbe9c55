"""Runs taken over after their process died, on a real Redis: a second runtime handles the
same job again, as a worker does after a kill -9. What ran again, what was posted twice,
what history holds. (The process died here = `Crash` raised at that point, or a task frozen
with its liveness mark gone; tests/e2e/test_chaos.py does the same with real processes.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from runtime.agent import Runtime
from runtime.approval.models import ApprovalStatus
from runtime.channel import ApprovalRequested, Event, Notice, Reply
from runtime.loop import INTERRUPTED, OUTCOME_UNKNOWN
from runtime.middleware.chain import Handler, ToolInvocation
from runtime.models import (
    AssistantMessage,
    ConversationRef,
    Message,
    StopReason,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
)
from runtime.retake import CONTINUING
from tests.support import ADMIN, ALICE, HERE, PREFIX, RecordingChannel, make_runtime


class Crash(BaseException):
    """The process dies here."""


class Scripted:
    """A model that answers from a script shared by the runtimes (the one that dies and the
    one that takes over); a `Crash` in the script is raised instead of answering."""

    name = "scripted"
    offline_demo = False

    def __init__(self, *steps: AssistantMessage | Crash) -> None:
        self.steps = list(steps)
        self.asked = 0

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        self.asked += 1
        step = self.steps.pop(0)
        if isinstance(step, Crash):
            raise step
        return step


def asks(*calls: tuple[str, str, str]) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in calls])


def says(text: str) -> AssistantMessage:
    return AssistantMessage(content=text)


def write(call_id: str, path: str, text: str) -> tuple[str, str, str]:
    return call_id, "write", f'{{"path": "{path}", "content": "{text}"}}'


def bash(call_id: str, command: str) -> tuple[str, str, str]:
    return call_id, "bash", f'{{"command": "{command}"}}'


class Calls:
    """A middleware at the end of the chain: counts the calls that reached their tool, and
    crashes the process at the call ids given, once their tool ran (`crash`: its effect
    happened, its result is not recorded) or before it starts (`before`), or freezes it."""

    def __init__(
        self, crash: Sequence[str] = (), freeze: Sequence[str] = (), before: Sequence[str] = ()
    ) -> None:
        self.ran: list[str] = []
        self.crash = set(crash)
        self.before = set(before)
        self.freeze = set(freeze)
        self.frozen = asyncio.Event()

    async def __call__(self, invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        call_id = invocation.call.id
        if invocation.judging:  # only judged (for a batch): it does not reach its tool
            return await call_next(invocation)
        if call_id in self.before:
            self.before.discard(call_id)
            raise Crash
        if call_id in self.freeze:
            self.frozen.set()
            await asyncio.Event().wait()  # forever: this process hangs, then dies
        self.ran.append(call_id)
        result = await call_next(invocation)
        if call_id in self.crash:
            self.crash.discard(call_id)
            raise Crash
        return result


def runtime_with(
    redis: aioredis.Redis, workdir: Path, model: Scripted, calls: Calls
) -> tuple[Runtime, RecordingChannel]:
    runtime, channel = make_runtime(redis, workdir, model, liveness_ttl=2)
    runtime.loop.middlewares.append(calls)
    return runtime, channel


async def history_of(runtime: Runtime, session: str) -> list[Message]:
    return await runtime.history.load(session)


def users(history: Sequence[Message]) -> list[str]:
    return [m.content for m in history if m.role == "user"]


def tool_answers(history: Sequence[Message]) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in history if isinstance(m, ToolMessage)}


def replies(channel: RecordingChannel) -> list[str]:
    return [e.text for e in channel.of(Reply)]


def continuing(channel: RecordingChannel) -> int:
    return sum(e.text == CONTINUING for e in channel.of(Notice))


async def test_a_run_taken_over_between_two_calls_never_repeats_a_recorded_step(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(
        asks(write("c1", "a.txt", "1"), write("c2", "b.txt", "2"), write("c3", "c.txt", "3")),
        says("done"),
    )
    calls = Calls(crash=["c2"])
    first, _ = runtime_with(redis, workdir, model, calls)
    with pytest.raises(Crash):
        await first.run("s1", "write three files", ALICE, HERE, job="j1")

    second, channel = runtime_with(redis, workdir, model, calls)
    result = await second.run("s1", "write three files", ALICE, HERE, job="j1")

    assert result.stop_reason is StopReason.FINAL and result.final_text == "done"
    assert calls.ran == ["c1", "c2"]  # c1, c2 not again (c2 was running); c3 never started
    assert (workdir / "b.txt").exists() and not (workdir / "c.txt").exists()
    history = await history_of(second, "s1")
    assert users(history) == ["write three files"]  # the message entered history once
    answers = tool_answers(history)
    assert answers["c2"] == OUTCOME_UNKNOWN and answers["c3"] == INTERRUPTED
    assert model.asked == 2  # the model's first answer was recorded: not asked again
    assert replies(channel) == ["done"] and continuing(channel) == 1


async def test_an_answer_recorded_but_not_posted_is_posted_by_the_retake(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(says("the answer"))
    first, channel = runtime_with(redis, workdir, model, Calls())

    async def dies_on_reply(conversation: ConversationRef, event: Event) -> None:
        if isinstance(event, Reply):
            raise Crash

    channel.send = dies_on_reply  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await first.run("s1", "question", ALICE, HERE, job="j1")

    second, channel = runtime_with(redis, workdir, model, Calls())
    await second.run("s1", "question", ALICE, HERE, job="j1")
    assert replies(channel) == ["the answer"] and model.asked == 1
    assert users(await history_of(second, "s1")) == ["question"]


async def test_a_finished_job_delivered_again_does_nothing(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(says("hi"))
    first, _ = runtime_with(redis, workdir, model, Calls())
    await first.run("s1", "hello", ALICE, HERE, job="j1")
    second, channel = runtime_with(redis, workdir, model, Calls())
    await second.run("s1", "hello", ALICE, HERE, job="j1")
    assert channel.events == [] and model.asked == 1
    assert users(await history_of(second, "s1")) == ["hello"]


async def test_a_job_delivered_again_after_the_session_moved_on_is_no_new_run(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """A worker presumed dead (its liveness mark lapsed while it stalled) may hand a job over
    and still finish it: the copy that comes late must not run the message a second time."""
    model = Scripted(says("one"), says("two"))
    runtime, channel = runtime_with(redis, workdir, model, Calls())
    await runtime.run("s1", "first", ALICE, HERE, job="j1")
    await runtime.run("s1", "second", ALICE, HERE, job="j2")
    posted = len(channel.events)
    await runtime.run("s1", "first", ALICE, HERE, job="j1")
    assert len(channel.events) == posted and model.asked == 2
    assert users(await history_of(runtime, "s1")) == ["first", "second"]


async def suspended(
    redis: aioredis.Redis, workdir: Path, model: Scripted, calls: Calls
) -> tuple[Runtime, str]:
    """A run in session s1 waits for approval of `rm victim.txt`."""
    (workdir / "victim.txt").write_text("precious")
    runtime, _ = runtime_with(redis, workdir, model, calls)
    result = await runtime.run("s1", "remove it", ALICE, HERE, job="j1")
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED and result.approval_id
    return runtime, result.approval_id


async def test_a_message_delivered_twice_while_the_session_waits_is_held_once(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(asks(bash("c1", "rm victim.txt")))
    runtime, _ = await suspended(redis, workdir, model, Calls())
    for _ in range(2):
        assert (await runtime.run("s1", "hello", ALICE, HERE, job="m1")).held
    assert await redis.llen(f"{PREFIX}:{{s1}}:held") == 1


async def test_a_decision_retaken_after_the_call_was_consumed_resumes_and_releases(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(asks(bash("c1", "rm victim.txt")), Crash(), says("removed"), says("hi"))
    calls = Calls()
    first, approval_id = await suspended(redis, workdir, model, calls)
    assert (await first.run("s1", "hello", ALICE, HERE, job="m1")).held
    with pytest.raises(Crash):  # dies asking the model, after the approved call was consumed
        await first.decide(approval_id, True, ADMIN, HERE, job="d1")
    assert not (workdir / "victim.txt").exists()

    second, channel = runtime_with(redis, workdir, model, calls)
    decision = await second.decide(approval_id, True, ADMIN, HERE, job="d1")

    assert decision.accepted
    assert calls.ran == ["c1"]  # the approved call ran once
    assert replies(channel) == ["removed", "hi"]  # the run's answer, then the held message's
    history = await history_of(second, "s1")
    assert users(history) == ["remove it", "hello"]
    assert await redis.llen(f"{PREFIX}:{{s1}}:held") == 0
    assert await redis.get(f"{PREFIX}:{{s1}}:pending") is None
    # Someone else clicking approve later is still told it was decided.
    again = await second.decide(approval_id, True, ADMIN, HERE, job="d2")
    assert not again.accepted and "already" in again.message


async def test_an_edited_decision_retaken_after_the_call_ran_continues_without_editing_again(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "other.txt").write_text("other")
    model = Scripted(asks(bash("c1", "rm victim.txt")), Crash(), says("removed"))
    calls = Calls()
    first, approval_id = await suspended(redis, workdir, model, calls)
    edit = json.dumps({"command": "rm other.txt"})
    with pytest.raises(Crash):
        await first.decide(approval_id, True, ADMIN, HERE, job="d1", edit=edit)
    assert (workdir / "victim.txt").exists() and not (workdir / "other.txt").exists()

    second, channel = runtime_with(redis, workdir, model, calls)
    decision = await second.decide(approval_id, True, ADMIN, HERE, job="d1", edit=edit)

    assert decision.accepted, decision.message
    assert calls.ran == ["c1"]  # the edited call ran once
    assert replies(channel) == ["removed"]
    assert (workdir / "victim.txt").exists()


async def test_a_crash_while_a_held_message_runs_keeps_it_for_the_retake(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(
        asks(bash("c1", "rm victim.txt")),
        says("removed"),
        asks(write("w1", "one.txt", "1"), write("w2", "two.txt", "2")),
        says("wrote them"),
        says("second done"),
    )
    calls = Calls(crash=["w2"])
    first, approval_id = await suspended(redis, workdir, model, calls)
    for job, text in (("m1", "write both"), ("m2", "second")):
        assert (await first.run("s1", text, ALICE, HERE, job=job)).held
    with pytest.raises(Crash):  # dies inside the first held message's run
        await first.decide(approval_id, True, ADMIN, HERE, job="d1")
    assert await redis.llen(f"{PREFIX}:{{s1}}:held") == 2  # nothing taken out before done

    second, channel = runtime_with(redis, workdir, model, calls)
    assert (await second.decide(approval_id, True, ADMIN, HERE, job="d1")).accepted

    assert calls.ran == ["c1", "w1", "w2"]
    assert replies(channel) == ["wrote them", "second done"]
    assert continuing(channel) == 1
    history = await history_of(second, "s1")
    assert users(history) == ["remove it", "write both", "second"]
    assert tool_answers(history)["w2"] == OUTCOME_UNKNOWN
    assert await redis.llen(f"{PREFIX}:{{s1}}:held") == 0


async def died_executing(
    redis: aioredis.Redis, workdir: Path, model: Scripted, calls: Calls
) -> tuple[str, asyncio.Task[object]]:
    """The approved `rm victim.txt` (call c1) hangs in its process, whose liveness mark then
    lapses: it died executing the call. The hung decision's task, to cancel at the end."""
    first, approval_id = await suspended(redis, workdir, model, calls)
    frozen: asyncio.Task[object] = asyncio.create_task(
        first.decide(approval_id, True, ADMIN, HERE, job="d1")
    )
    await asyncio.wait_for(calls.frozen.wait(), 5)

    async def no_renewal(worker: str, ttl_s: float) -> None:
        return None

    first.approvals.renew_mark = no_renewal  # type: ignore[method-assign]
    await redis.delete(f"{PREFIX}:worker:{first.worker_id}")  # the mark lapses: it died
    return approval_id, frozen


async def test_a_retaken_decision_whose_process_died_executing_ends_outcome_unknown(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(asks(bash("c1", "rm victim.txt")), says("it may have run"))
    calls = Calls(freeze=["c1"])
    approval_id, frozen = await died_executing(redis, workdir, model, calls)

    second, channel = runtime_with(redis, workdir, model, calls)
    decision = await second.decide(approval_id, True, ADMIN, HERE, job="d1")
    frozen.cancel()
    await asyncio.gather(frozen, return_exceptions=True)

    assert decision.accepted and calls.ran == []
    assert (workdir / "victim.txt").exists()
    record = await second.approvals.load(approval_id)
    assert record is not None and record[0].status is ApprovalStatus.OUTCOME_UNKNOWN
    said = replies(channel)
    assert any("interrupted while it ran" in text for text in said)
    assert said[-1] == "it may have run"  # the run went on with the unknown outcome
    assert await redis.get(f"{PREFIX}:{{s1}}:pending") is None


async def test_a_retake_while_the_run_waits_posts_a_lost_notice_and_waits_on(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "victim.txt").write_text("precious")
    model = Scripted(asks(bash("c1", "rm victim.txt")))
    first, channel = runtime_with(redis, workdir, model, Calls())

    async def dies_on_notice(conversation: ConversationRef, event: Event) -> None:
        raise Crash

    first.suspender.send = dies_on_notice
    with pytest.raises(Crash):
        await first.run("s1", "remove it", ALICE, HERE, job="j1")

    second, channel = runtime_with(redis, workdir, model, Calls())
    result = await second.run("s1", "remove it", ALICE, HERE, job="j1")
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED and result.approval_id
    assert [e.notice.approval_id for e in channel.of(ApprovalRequested)] == [result.approval_id]
    assert model.asked == 1 and (workdir / "victim.txt").exists()


async def test_a_held_message_whose_run_died_before_its_notice_posts_it_on_the_retake(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(
        asks(bash("c1", "rm victim.txt")),
        says("removed"),
        asks(bash("c2", "rm other.txt")),
    )
    first, approval_id = await suspended(redis, workdir, model, Calls())
    assert (await first.run("s1", "remove the other", ALICE, HERE, job="m1")).held

    async def dies_on_notice(conversation: ConversationRef, event: Event) -> None:
        raise Crash

    first.suspender.send = dies_on_notice
    with pytest.raises(Crash):  # the held message's run suspends, then dies before its notice
        await first.decide(approval_id, True, ADMIN, HERE, job="d1")

    second, channel = runtime_with(redis, workdir, model, Calls())
    assert (await second.decide(approval_id, True, ADMIN, HERE, job="d1")).accepted
    notices = [e.notice for e in channel.of(ApprovalRequested)]
    assert [n.tool for n in notices] == ["bash"] and notices[0].approval_id != approval_id
    assert "other.txt" in notices[0].arguments
    assert await redis.llen(f"{PREFIX}:{{s1}}:held") == 0  # its run waits in the checkpoint


@pytest.mark.parametrize("stored", [False, True], ids=["not-written", "written-reply-lost"])
async def test_redis_lost_while_a_run_suspends_retries_the_job_instead_of_dropping_it(
    redis: aioredis.Redis, workdir: Path, stored: bool
) -> None:
    """Right after Redis restarts, a pooled connection fails once: the checkpoint's write is
    lost, or written with its reply lost. The job is tried again (the worker does that on an
    outage); the user's message is neither dropped with "not executed" nor run twice."""
    (workdir / "victim.txt").write_text("precious")
    model = Scripted(asks(bash("c1", "rm victim.txt")))
    runtime, channel = runtime_with(redis, workdir, model, Calls())
    create = runtime.approvals.create

    async def connection_lost(*args: Any, **kwargs: Any) -> Any:
        if stored:
            await create(*args, **kwargs)
        raise RedisConnectionError("Connection closed by server.")

    runtime.approvals.create = connection_lost  # type: ignore[method-assign]
    with pytest.raises(RedisConnectionError):
        await runtime.run("s1", "remove it", ALICE, HERE, job="j1")
    runtime.approvals.create = create  # type: ignore[method-assign]

    result = await runtime.run("s1", "remove it", ALICE, HERE, job="j1")

    assert result.stop_reason is StopReason.APPROVAL_REQUIRED and result.approval_id
    assert [e.notice.approval_id for e in channel.of(ApprovalRequested)] == [result.approval_id]
    assert not any("not executed" in text for text in replies(channel))
    assert await redis.get(f"{PREFIX}:{{s1}}:pending") == result.approval_id
    assert users(await history_of(runtime, "s1")) == ["remove it"]
    # Its call never started (no mark): suspended again as it was, the model not asked again.
    assert model.asked == 1 and (workdir / "victim.txt").exists()


async def test_a_retake_that_settled_an_executing_call_posts_its_answer_once_if_retaken(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """The decision's process died executing the call; the retake settles it (outcome
    unknown), the model answers, and that process dies too before finishing the job. The
    third take posts the answer under the same key (the platform posts it once), and the
    model was sent the settled call's answer."""
    model = Scripted(asks(bash("c1", "rm victim.txt")), says("it may have run"))
    calls = Calls(freeze=["c1"])
    approval_id, frozen = await died_executing(redis, workdir, model, calls)

    seen: list[Sequence[Message]] = []
    complete = model.complete

    async def recorded(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
        seen.append(list(messages))
        return await complete(messages, tools)

    model.complete = recorded  # type: ignore[method-assign]
    second, posted = runtime_with(redis, workdir, model, calls)

    async def dies(session: str, job: str, held: str = "") -> None:
        raise Crash

    second.runs.finish = dies  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await second.decide(approval_id, True, ADMIN, HERE, job="d1")
    frozen.cancel()
    await asyncio.gather(frozen, return_exceptions=True)

    third, reposted = runtime_with(redis, workdir, model, calls)
    assert (await third.decide(approval_id, True, ADMIN, HERE, job="d1")).accepted

    first_post = [e for e in posted.of(Reply) if e.text == "it may have run"]
    again = [e for e in reposted.of(Reply) if e.text == "it may have run"]
    assert len(first_post) == 1 and len(again) == 1 and again[0].again
    assert again[0].key == first_post[0].key  # one message in the chat
    assert calls.ran == [] and model.asked == 2
    assert tool_answers(seen[-1])["c1"].startswith("outcome unknown")
    history = await history_of(third, "s1")
    assert [m.tool_call_id for m in history if isinstance(m, ToolMessage)] == ["c1"]
