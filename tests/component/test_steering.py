"""Steering on a real Redis and a real inbox: the requester's messages queued behind their
running run join it at its next model step, in arrival order, once, also across a crash
between joining and acknowledging; anything else behind the run keeps its place. (The
whole path through Slack and the worker: tests/e2e/test_steering.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.dispatch import steering_kind
from runtime.agent import Runtime
from runtime.channel import Reply, RunFinished
from runtime.models import (
    Actor,
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolMessage,
    ToolSpec,
)
from runtime.queue.inbound import Attachment, Inbound
from runtime.queue.inbox import Inbox
from runtime.queue.steering import Steering
from runtime.steer import SENT_MEANWHILE
from runtime.store.keys import Keys
from tests.support import ALICE, HERE, PREFIX, RecordingChannel, make_runtime

SESSION = "console:steer"
BOB = Actor(platform="console", user_id="bob")


class Crash(BaseException):
    """The process dies here."""


class Model:
    """Answers from a script shared by the runtimes (the one that dies, the one that takes
    over) and keeps what it was sent each time."""

    name = "scripted"
    offline_demo = False

    def __init__(self, *steps: AssistantMessage) -> None:
        self.steps = list(steps)
        self.sent: list[list[Message]] = []

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        self.sent.append(list(messages))
        return self.steps.pop(0)


def reads(call_id: str) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=[ToolCall(id=call_id, name="read", arguments='{"path": "notes.txt"}')]
    )


def says(text: str) -> AssistantMessage:
    return AssistantMessage(content=text)


def meanwhile(text: str) -> str:
    return SENT_MEANWHILE + text


def users(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if m.role == "user"]


def message(text: str, actor: Actor = ALICE, **more: Any) -> Inbound:
    key = uuid.uuid4().hex
    return Inbound(
        platform="console",
        event_id=key,
        dedupe_keys=(key,),
        session=SESSION,
        conversation=HERE,
        actor=actor,
        text=text,
        **more,
    )


@pytest.fixture
def inbox(redis: aioredis.Redis) -> Inbox:
    return Inbox(redis, Keys(PREFIX))


async def queue(inbox: Inbox, *inputs: Inbound) -> list[str]:
    ids = [await inbox.put(SESSION, i.model_dump_json(), i.dedupe_keys) for i in inputs]
    assert all(ids)
    return [str(i) for i in ids]


async def lane(inbox: Inbox) -> list[str]:
    return [str(i) for i in await inbox.redis.lrange(inbox.lane_key(SESSION), 0, -1)]


def steering_runtime(
    redis: aioredis.Redis, workdir: Path, model: Model, inbox: Inbox
) -> tuple[Runtime, RecordingChannel]:
    (workdir / "notes.txt").write_text("notes\n")
    runtime, channel = make_runtime(redis, workdir, model)
    runtime.steering = Steering(inbox, steering_kind)
    return runtime, channel


def replies(channel: RecordingChannel) -> list[str]:
    return [e.text for e in channel.of(Reply)]


async def test_the_requesters_messages_join_the_run_in_order_and_others_keep_their_place(
    redis: aioredis.Redis, workdir: Path, inbox: Inbox
) -> None:
    model = Model(reads("c1"), says("done"))
    runtime, channel = steering_runtime(redis, workdir, model, inbox)
    run, first, second, bobs, third = await queue(
        inbox,
        message("look at the notes"),
        message("not prod!"),
        message("staging only"),
        message("me too", BOB),
        message("and be quick"),
    )
    await runtime.run(SESSION, "look at the notes", ALICE, HERE, job=run)

    # The second question carries the tool's result, then both messages, in arrival order.
    asked = model.sent[1]
    assert isinstance(asked[-3], ToolMessage)
    assert users(asked[-2:]) == [meanwhile("not prod!"), meanwhile("staging only")]
    assert replies(channel) == ["done"]
    history = users(await runtime.history.load(SESSION))
    assert history == ["look at the notes", meanwhile("not prod!"), meanwhile("staging only")]
    # Bob's message, and the requester's after it, wait for their own runs, in order.
    assert await lane(inbox) == [run, bobs, third]
    assert first not in await lane(inbox) and second not in await lane(inbox)


@pytest.mark.parametrize(
    "behind",
    [
        message("/pending"),
        message("here is the file", attachments=(Attachment(key="F1", name="a.txt"),)),
        message("me too", BOB),
    ],
    ids=["command", "file", "someone-else"],
)
async def test_commands_files_and_other_peoples_messages_are_never_steered_in(
    redis: aioredis.Redis, workdir: Path, inbox: Inbox, behind: Inbound
) -> None:
    model = Model(reads("c1"), says("done"))
    runtime, _ = steering_runtime(redis, workdir, model, inbox)
    run, waiting, after = await queue(inbox, message("look"), behind, message("not prod!"))
    await runtime.run(SESSION, "look", ALICE, HERE, job=run)
    assert users(model.sent[1]) == ["look"]  # nothing joined: not even what came after it
    assert await lane(inbox) == [run, waiting, after]


async def test_feedback_behind_the_run_holds_no_message_back(
    redis: aioredis.Redis, workdir: Path, inbox: Inbox
) -> None:
    model = Model(reads("c1"), says("done"))
    runtime, _ = steering_runtime(redis, workdir, model, inbox)
    thumbs = message("good", kind="feedback")
    run, feedback, _ = await queue(inbox, message("look"), thumbs, message("not prod!"))
    await runtime.run(SESSION, "look", ALICE, HERE, job=run)
    assert users(model.sent[1]) == ["look", meanwhile("not prod!")]
    assert await lane(inbox) == [run, feedback]  # the click is recorded in its turn


async def test_a_turn_without_tools_reads_nothing_more(
    redis: aioredis.Redis, workdir: Path, inbox: Inbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = Model(says("hi"))
    runtime, _ = steering_runtime(redis, workdir, model, inbox)
    run, _queued = await queue(inbox, message("hello"), message("still there?"))
    looked: list[str] = []
    behind = inbox.behind

    async def counted(lane: str, job: str, count: int) -> Any:
        looked.append(job)
        return await behind(lane, job, count)

    monkeypatch.setattr(inbox, "behind", counted)
    await runtime.run(SESSION, "hello", ALICE, HERE, job=run)
    assert looked == []  # no model step after tools: no boundary, no round trip
    assert len(await lane(inbox)) == 2


async def test_a_crash_between_joining_and_acknowledging_neither_loses_nor_doubles(
    redis: aioredis.Redis, workdir: Path, inbox: Inbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = Model(reads("c1"), reads("c2"), says("done"))
    dying, _ = steering_runtime(redis, workdir, model, inbox)
    run, steered = await queue(inbox, message("look"), message("not prod!"))

    async def dies(*_: Any) -> None:
        raise Crash

    monkeypatch.setattr(inbox, "ack", dies)
    with pytest.raises(Crash):
        await dying.run(SESSION, "look", ALICE, HERE, job=run)
    assert users(await dying.history.load(SESSION)) == ["look", meanwhile("not prod!")]
    assert await lane(inbox) == [run, steered]  # joined, not acknowledged
    monkeypatch.undo()

    # Another process takes the run over: it goes on from history, and at its next step
    # finds the message already joined (it only acknowledges it).
    taker, channel = steering_runtime(redis, workdir, model, inbox)
    await taker.run(SESSION, "look", ALICE, HERE, job=run)
    assert users(model.sent[-1]) == ["look", meanwhile("not prod!")]
    assert replies(channel) == ["done"]
    assert await lane(inbox) == [run]

    # A worker that held the message's job before it was acknowledged: nothing happens.
    before = len(channel.events)
    await taker.run(SESSION, "not prod!", ALICE, HERE, job=steered)
    assert len(channel.events) == before and not model.steps
    assert users(await taker.history.load(SESSION)) == ["look", meanwhile("not prod!")]


async def test_a_cancel_queued_behind_the_run_stops_it_at_its_next_step(
    redis: aioredis.Redis, workdir: Path, inbox: Inbox
) -> None:
    model = Model(reads("c1"), says("never asked"))
    runtime, channel = steering_runtime(redis, workdir, model, inbox)
    run, mine, cancel = await queue(
        inbox, message("look"), message("wait", BOB), message("/cancel")
    )
    result = await runtime.run(SESSION, "look", ALICE, HERE, job=run)

    assert result.stop_reason is StopReason.CANCELLED and len(model.sent) == 1
    assert [e.stop_reason for e in channel.of(RunFinished)] == [StopReason.CANCELLED]
    assert users(await runtime.history.load(SESSION)) == ["look"]  # "wait" did not join
    assert await lane(inbox) == [run, mine, cancel]  # both answered in their turn
    said = await runtime.cancel(SESSION, ALICE, HERE, job=cancel)
    assert said == "The running request stopped at its next step."
    assert await runtime.cancel(SESSION, ALICE, HERE, job="another") == "Nothing to cancel."


async def test_someone_elses_cancel_waits_its_turn_and_the_run_goes_on(
    redis: aioredis.Redis, workdir: Path, inbox: Inbox
) -> None:
    model = Model(reads("c1"), says("done"))
    runtime, channel = steering_runtime(redis, workdir, model, inbox)
    run, cancel = await queue(inbox, message("look"), message("/cancel", BOB))
    result = await runtime.run(SESSION, "look", ALICE, HERE, job=run)

    assert result.stop_reason is StopReason.FINAL and len(model.sent) == 2
    assert [e.text for e in channel.of(Reply)] == ["done"]
    assert await lane(inbox) == [run, cancel]  # Bob's /cancel keeps its place
    assert await runtime.cancel(SESSION, BOB, HERE, job=cancel) == "Nothing to cancel."
