"""The clarify tool end to end on a real Redis with the real OpenAI client against the fake:
a question suspends the run like an approval, only the requester answers it, and the answer
comes back to the model as the call's result, exactly once, in any process."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.console.channel import (
    ConsoleChannel,
    render_request,
    render_update,
)
from adapters.console.chat import ConsoleChat
from adapters.dispatch import dispatch, handle_inbound
from adapters.pending import render_pending
from adapters.router import Router
from bot.cli_approvals import run_approvals_command
from runtime.agent import Runtime
from runtime.approval.decisions import Answer
from runtime.channel import ApprovalRequested, ApprovalUpdated, Event, Reply, RunFinished
from runtime.models import Actor, ConversationRef, StopReason
from runtime.policy.model import ApprovalRules, PolicyDocument, ToolRules
from runtime.providers.openai_provider import OpenAIProvider
from runtime.queue.inbound import Attachment, Inbound
from runtime.tools.clarify import ClarifyArgs, ClarifyTool
from runtime.tools.files import ReadTool
from runtime.tools.registry import ToolRegistry
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.support import ADMIN, ALICE, HERE, PREFIX, RecordingChannel, make_runtime

BOB = Actor(platform="console", user_id="bob")
ASK = {"question": "Which environment?", "options": ["staging", "prod"]}


class Crash(BaseException):
    """The process dies here."""


def runtime_for(
    redis: aioredis.Redis, workdir: Path, fake: FakeOpenAI, **kwargs: Any
) -> tuple[Runtime, RecordingChannel]:
    provider = OpenAIProvider("fake", api_key="sk-test", base_url=fake.base_url, max_retries=0)
    registry = ToolRegistry([ReadTool(), ClarifyTool()])
    return make_runtime(redis, workdir, provider, registry=registry, **kwargs)


def tool_results(fake: FakeOpenAI, request: int) -> list[str]:
    messages = fake.requests[request]["messages"]
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


async def asked(
    redis: aioredis.Redis, workdir: Path, fake: FakeOpenAI, args: dict[str, Any] = ASK, **kw: Any
) -> tuple[Runtime, RecordingChannel, str]:
    fake.script = [calls(("call_q", "clarify", args)), reply("Deploying to the chosen one.")]
    runtime, channel = runtime_for(redis, workdir, fake, **kw)
    result = await runtime.run("s1", "deploy it", ALICE, HERE)
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED and result.approval_id
    return runtime, channel, result.approval_id


async def test_the_requesters_answer_resumes_the_run_with_it(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    # Approval requests go to an approvers' channel and to approvers directly too: not questions.
    rules = ApprovalRules(notify=["slack:T1:CAPPROVERS", "dm"], approvers=["slack:UCAROL"])
    runtime, channel, question_id = await asked(
        redis, workdir, fake_openai, document=PolicyDocument(approvals=rules)
    )

    (requested,) = channel.of(ApprovalRequested)
    notice = requested.notice
    assert notice.kind == "question" and notice.question == "Which environment?"
    assert notice.options == ("staging", "prod") and not notice.allow_other
    assert [c for c, e in channel.events if isinstance(e, ApprovalRequested)] == [HERE]
    shown = render_request(notice)
    assert "1. staging" in shown and "2. prod" in shown and "answer with a number (1-2)" in shown
    assert question_id in render_pending(notice) and "Which environment?" in render_pending(notice)
    key = f"{PREFIX}:{{s1}}:approval:{question_id}"
    record = json.loads(str(await redis.hget(key, "record")))
    assert record["kind"] == "question" and record["options"] == ["staging", "prod"]

    # Someone else, even an admin, is refused; nothing changes.
    for other in (BOB, ADMIN):
        refused = await runtime.decide(question_id, Answer("1"), other, HERE)
        assert not refused.accepted
        assert refused.message.startswith(f"Only {ALICE.key} can answer this question")
    approve = await runtime.decide(question_id, True, ADMIN, HERE)
    assert not approve.accepted and approve.message.startswith("Only")
    approve = await runtime.decide(question_id, True, ALICE, HERE)
    assert not approve.accepted and f"/answer {question_id}" in approve.message
    assert await redis.hget(key, "status") == "pending" and len(fake_openai.requests) == 1
    # Not an option, and no own words allowed: told which to choose.
    wrong = await runtime.decide(question_id, Answer("qa"), ALICE, HERE)
    assert not wrong.accepted and "1. staging, 2. prod" in wrong.message

    decision = await runtime.decide(question_id, Answer("2"), ALICE, HERE)

    assert decision.accepted, decision.message
    assert decision.run is not None and decision.run.stop_reason is StopReason.FINAL
    assert tool_results(fake_openai, 1) == ["The requester answered: prod"]
    assert channel.of(Reply)[-1].text == "Deploying to the chosen one."
    (updated,) = channel.of(ApprovalUpdated)
    assert updated.notice.status == "answered" and updated.notice.answer == "prod"
    assert (
        render_update(updated.notice) == f"[question {question_id} answered by {ALICE.key}: prod]"
    )
    assert (
        await redis.hget(key, "status") == "answered" and await redis.hget(key, "answer") == "prod"
    )
    stream = await runtime.approvals.audit_entries("s1")
    assert [e["event"] for e in stream] == ["requested", *["refused"] * 3, "answered"]
    trail = await runtime.audit.newest(100)
    (answered,) = [e for e in trail if e.event == "question_answered"]
    assert answered.actor == ALICE.key and answered.fields["answer"] == "prod"
    refusals = [e for e in trail if e.event == "approval_refused"]
    assert {e.actor for e in refusals} == {BOB.key, ADMIN.key, ALICE.key}

    shown_one = io.StringIO()
    show = argparse.Namespace(verb="show", id=question_id, json=False)
    assert await run_approvals_command(runtime.wing, show, shown_one) == 0
    fields = shown_one.getvalue()
    assert "kind:" in fields and "question" in fields and "Which environment?" in fields
    assert "answer:" in fields and "prod" in fields

    again = await runtime.decide(question_id, Answer("1"), ALICE, HERE)
    assert not again.accepted and "already" in again.message
    assert len(fake_openai.requests) == 2  # never asked, never resumed again


async def test_a_plain_message_of_the_requester_answers_others_are_held(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    args = {**ASK, "allow_other": True}
    runtime, channel, _ = await asked(redis, workdir, fake_openai, args)
    fake_openai.script.append(reply("Noted, Bob."))
    told: list[str] = []

    async def say(text: str) -> None:
        told.append(text)

    held = await dispatch(runtime, "s1", "what about qa?", BOB, HERE, say)
    assert held is not None and held.held  # someone else's words wait, as during an approval
    result = await dispatch(runtime, "s1", "the qa cluster, please", ALICE, HERE, say)

    assert result is not None and result.stop_reason is StopReason.FINAL
    assert tool_results(fake_openai, 1) == ["The requester answered: the qa cluster, please"]
    assert [r.text for r in channel.of(Reply)] == ["Deploying to the chosen one.", "Noted, Bob."]
    assert told == []


async def test_words_that_answered_a_question_answer_no_later_one_when_delivered_again(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """The job whose words answered the first question resumed the run, which asked a second
    one; its process died before the job was acknowledged. Delivered again, "2" must not
    answer the second question: the job retakes the run it resumed."""
    runtime, channel, first = await asked(redis, workdir, fake_openai)
    second_ask = {"question": "Which region?", "options": ["eu", "us"]}
    fake_openai.script = [calls(("call_r", "clarify", second_ask)), reply("Deployed.")]
    result = await dispatch(runtime, "s1", "2", ALICE, HERE, _ignore, job="job-answer")
    assert result is not None and result.stop_reason is StopReason.APPROVAL_REQUIRED
    second = result.approval_id
    assert second and second != first

    again = await dispatch(runtime, "s1", "2", ALICE, HERE, _ignore, job="job-answer")

    assert again is None or again.steps == 0  # a retake of a run that had stopped: nothing
    record = await runtime.approvals.load(second)
    assert record is not None and record[0].status == "pending"  # still the asker's to answer
    assert len(fake_openai.requests) == 2 and "Deployed." not in [r.text for r in channel.of(Reply)]


async def test_a_message_with_files_is_never_an_answer_it_is_held(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    args = {**ASK, "allow_other": True}
    runtime, _, question_id = await asked(redis, workdir, fake_openai, args)
    inbound = Inbound(
        platform=HERE.platform,
        event_id="e1",
        dedupe_keys=("e1",),
        session="s1",
        conversation=HERE,
        actor=ALICE,
        text="prod, and here is the log",
        attachments=(Attachment(key="F1", name="deploy.log"),),
    )

    result = await handle_inbound(runtime, Router(), inbound, "j1")

    assert result is not None and result.held  # the words and the file run after the answer
    key = f"{PREFIX}:{{s1}}:approval:{question_id}"
    assert await redis.hget(key, "status") == "pending" and len(fake_openai.requests) == 1


async def test_after_the_answer_the_requesters_words_wait_for_the_batch_to_finish(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """The question answered (and its process gone) before the rest of its batch ran: the
    session still waits, and the requester's "1" is a message held for after it, not a
    second answer refused as "already decided" and lost."""
    fake_openai.script = [
        calls(("call_q", "clarify", ASK), ("call_r", "read", {"path": "notes.txt"})),
        reply("Deploying to staging."),
        reply("You said 1."),
    ]
    first, first_channel = runtime_for(redis, workdir, fake_openai)
    asked_run = await first.run("s1", "deploy it", ALICE, HERE)
    question_id = asked_run.approval_id
    assert question_id is not None

    async def dies_on_update(conversation: ConversationRef, event: Event) -> None:
        if isinstance(event, ApprovalUpdated):
            raise Crash
        await RecordingChannel.send(first_channel, conversation, event)

    first.settlement.send = dies_on_update
    with pytest.raises(Crash):
        await first.decide(question_id, Answer("1"), ALICE, HERE, job="d1")
    second, channel = runtime_for(redis, workdir, fake_openai)
    told: list[str] = []

    async def say(text: str) -> None:
        told.append(text)

    held = await dispatch(second, "s1", "1", ALICE, HERE, say)

    assert held is not None and held.held and told == []
    await second.decide(question_id, Answer("1"), ALICE, HERE, job="d1")  # the retake
    assert tool_results(fake_openai, 1)[0] == "The requester answered: staging"
    assert [r.text for r in channel.of(Reply)] == ["Deploying to staging.", "You said 1."]


async def test_the_requester_answers_only_where_the_question_was_asked(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    runtime, _, question_id = await asked(redis, workdir, fake_openai)
    elsewhere = ConversationRef(platform="console", id="console:elsewhere")
    refused = await runtime.decide(question_id, Answer("1"), ALICE, elsewhere)
    assert not refused.accepted
    assert refused.message == (
        f"question {question_id} can only be decided in the conversation that requested it"
    )
    # Their words in another session are a message there, not an answer here.
    fake_openai.script.insert(0, reply("Hello."))
    said = await dispatch(runtime, "s2", "1", ALICE, elsewhere, _ignore)
    assert said is not None and said.final_text == "Hello."
    key = f"{PREFIX}:{{s1}}:approval:{question_id}"
    assert await redis.hget(key, "status") == "pending"


async def _ignore(text: str) -> None:
    """Nothing is said privately in these tests' conversations."""


async def test_two_answers_at_once_one_wins_the_other_is_told(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    runtime, _, question_id = await asked(redis, workdir, fake_openai)
    first, second = await asyncio.gather(
        runtime.decide(question_id, Answer("1"), ALICE, HERE),
        runtime.decide(question_id, Answer("2"), ALICE, HERE),
    )
    (won,) = [d for d in (first, second) if d.accepted]
    (lost,) = [d for d in (first, second) if not d.accepted]
    assert lost.message == f"question {question_id} was already decided by {ALICE.key} (answered)"
    key = f"{PREFIX}:{{s1}}:approval:{question_id}"
    answer = str(await redis.hget(key, "answer"))
    assert tool_results(fake_openai, 1) == [f"The requester answered: {answer}"]
    assert len(fake_openai.requests) == 2 and won.run is not None


async def test_an_answer_approves_nothing_the_next_risky_call_still_waits_for_approval(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """clarify then a call the policy gates, in one batch: the answer resumes the batch, the
    gated call still asks the approvers, and an answer is no decision on it."""
    ask = {"question": "Approve reading notes.txt?", "options": ["Approve", "Reject"]}
    fake_openai.script = [
        calls(("call_q", "clarify", ask), ("call_r", "read", {"path": "notes.txt"})),
        reply("Read it."),
    ]
    rules = ApprovalRules(approvers=[ADMIN.key], requester_may_approve=False)
    document = PolicyDocument(tools=ToolRules(ask=["read"]), approvals=rules)
    runtime, channel = runtime_for(redis, workdir, fake_openai, document=document)
    question_id = (await runtime.run("s1", "read my notes", ALICE, HERE)).approval_id
    assert question_id is not None

    answered = await runtime.decide(question_id, Answer("Approve"), ALICE, HERE)

    assert answered.accepted and answered.run is not None
    approval_id = answered.run.approval_id
    assert answered.run.stop_reason is StopReason.APPROVAL_REQUIRED
    assert approval_id is not None and approval_id != question_id
    kinds = [e.notice.kind for e in channel.of(ApprovalRequested)]
    assert kinds == ["question", "approval"]
    # Neither the question's id nor an answer decides the approval.
    for actor in (ALICE, ADMIN):
        refused = await runtime.decide(approval_id, Answer("1"), actor, HERE)
        assert not refused.accepted
    again = await runtime.decide(question_id, True, ADMIN, HERE)
    assert not again.accepted
    key = f"{PREFIX}:{{s1}}:approval:{approval_id}"
    assert await redis.hget(key, "status") == "pending" and len(fake_openai.requests) == 1
    approved = await runtime.decide(approval_id, True, ADMIN, HERE)
    assert approved.accepted and approved.run is not None
    assert approved.run.stop_reason is StopReason.FINAL and len(fake_openai.requests) == 2


async def test_a_secret_in_the_answer_reaches_the_model_alone(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    args = {**ASK, "allow_other": True}
    runtime, channel, question_id = await asked(redis, workdir, fake_openai, args)
    words = "qa, with password=hunter2hunter2"

    decision = await runtime.decide(question_id, Answer(words), ALICE, HERE)

    assert decision.accepted
    assert tool_results(fake_openai, 1) == [f"The requester answered: {words}"]
    (updated,) = channel.of(ApprovalUpdated)
    assert updated.notice.answer == "qa, with password=[redacted]"
    trail = await runtime.audit.newest(100)
    (answered,) = [e for e in trail if e.event == "question_answered"]
    assert answered.fields["answer"] == "qa, with password=[redacted]"
    stream = await runtime.approvals.audit_entries("s1")
    assert all("hunter2" not in json.dumps(entry) for entry in stream)
    assert "hunter2" not in json.dumps([e.fields for e in trail])


async def test_an_unanswered_question_expires_and_the_model_is_told(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    runtime, channel, question_id = await asked(redis, workdir, fake_openai, timeout_s=0.2)
    await asyncio.sleep(0.3)
    assert await runtime.sweep() == 1
    (updated,) = channel.of(ApprovalUpdated)
    assert updated.notice.status == "expired"
    fake_openai.script = [reply("Nobody answered, so I did nothing.")]
    await runtime.run("s1", "well?", ALICE, HERE)
    assert tool_results(fake_openai, 1) == [
        "no answer: the question expired before the person who asked answered it"
    ]
    late = await runtime.decide(question_id, Answer("1"), ALICE, HERE)
    assert not late.accepted and "expired" in late.message


async def test_an_answer_recorded_before_a_crash_is_resumed_with_never_asked_again(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    first, first_channel, question_id = await asked(redis, workdir, fake_openai)

    async def dies_on_update(conversation: ConversationRef, event: Event) -> None:
        if isinstance(event, ApprovalUpdated):
            raise Crash  # after the decision script, before the run goes on
        await RecordingChannel.send(first_channel, conversation, event)

    first.settlement.send = dies_on_update
    with pytest.raises(Crash):
        await first.decide(question_id, Answer("staging"), ALICE, HERE, job="d1")
    assert len(fake_openai.requests) == 1

    second, channel = runtime_for(redis, workdir, fake_openai)
    decision = await second.decide(question_id, Answer("staging"), ALICE, HERE, job="d1")

    assert decision.accepted
    assert tool_results(fake_openai, 1) == ["The requester answered: staging"]
    assert [r.text for r in channel.of(Reply)] == ["Deploying to the chosen one."]
    assert len(fake_openai.requests) == 2


async def test_the_operator_cli_shows_a_question_redacted_and_cannot_answer_it(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret = "sk-" + "a1b2c3d4" * 4
    args = {"question": "Use token=hunter2hunter2 here?", "options": [secret, "no"]}
    runtime, _, question_id = await asked(redis, workdir, fake_openai, args)

    for as_json in (True, False):
        out = io.StringIO()
        show = argparse.Namespace(verb="show", id=question_id, json=as_json)
        assert await run_approvals_command(runtime.wing, show, out) == 0
        assert "hunter2" not in out.getvalue() and secret not in out.getvalue()
        assert "token=[redacted]" in out.getvalue()
        if as_json:
            assert json.loads(out.getvalue())["options"] == ["[redacted]", "no"]

    # The operator is not the requester: neither answer nor withdrawal, and it says so.
    for verb in ("approve", "reject"):
        decide = argparse.Namespace(verb=verb, id=question_id, always=False, reason=[])
        assert await run_approvals_command(runtime.wing, decide, io.StringIO()) == 1
        assert f"Only {ALICE.key} can answer this question" in capsys.readouterr().err
    key = f"{PREFIX}:{{s1}}:approval:{question_id}"
    assert await redis.hget(key, "status") == "pending" and len(fake_openai.requests) == 1


@pytest.mark.parametrize("dies_at", [ApprovalRequested, RunFinished])
async def test_a_retake_after_the_question_was_posted_asks_nothing_again(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, dies_at: type[Event]
) -> None:
    """The process dies as it posts the question (not known to be posted: posted again only
    if it is not there) or after it (known: not posted again); the model is not asked again."""
    fake_openai.script = [calls(("call_q", "clarify", ASK)), reply("Deploying to prod.")]
    first, first_channel = runtime_for(redis, workdir, fake_openai)

    async def dies(conversation: ConversationRef, event: Event) -> None:
        await RecordingChannel.send(first_channel, conversation, event)
        if isinstance(event, dies_at):
            raise Crash

    first.channel.channel.send = dies  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await first.run("s1", "deploy it", ALICE, HERE, job="j1")
    (posted,) = first_channel.of(ApprovalRequested)

    second, channel = runtime_for(redis, workdir, fake_openai)
    retaken = await second.run("s1", "deploy it", ALICE, HERE, job="j1")

    assert retaken.approval_id == posted.notice.approval_id
    again = [e.again for e in channel.of(ApprovalRequested)]
    assert again == ([True] if dies_at is ApprovalRequested else [])
    assert len(fake_openai.requests) == 1
    decision = await second.decide(posted.notice.approval_id, Answer("2"), ALICE, HERE)
    assert decision.accepted and tool_results(fake_openai, 1) == ["The requester answered: prod"]


async def test_commands_of_the_requester_are_commands_not_answers(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """Even when any words answer: /pending lists the question, /cancel withdraws it, and an
    answer after that is refused as already decided."""
    runtime, channel, question_id = await asked(
        redis, workdir, fake_openai, {**ASK, "allow_other": True}
    )
    told: list[str] = []

    async def say(text: str) -> None:
        told.append(text)

    await dispatch(runtime, "s1", "/pending", ALICE, HERE, say)
    assert question_id in told[-1] and "question: Which environment?" in told[-1]
    await dispatch(runtime, "s1", "/cancel", ALICE, HERE, say)
    assert f"Question {question_id} withdrawn" in told[-1]
    key = f"{PREFIX}:{{s1}}:approval:{question_id}"
    assert await redis.hget(key, "status") == "rejected"
    (updated,) = channel.of(ApprovalUpdated)
    assert updated.notice.status == "rejected"
    await dispatch(runtime, "s1", f"/answer {question_id} 1", ALICE, HERE, say)
    assert told[-1] == f"question {question_id} was already decided by {ALICE.key} (rejected)"
    assert len(fake_openai.requests) == 1


def test_the_arguments_are_checked() -> None:
    ClarifyArgs(question="Which?", options=["a", "b"])
    ClarifyArgs(question="How many?", options=["1", "2", "10"])  # numbers in their own place
    ClarifyArgs(question="How many?", options=["1", "0"])
    bad_options: list[Any] = [
        ["a"],
        ["a", "A"],
        ["a", " "],
        [str(i) for i in range(7)],
        ["a", "x" * 76],
        ["2", "1"],  # typing "1" would mean the second option, clicking it the first
        ["a", "b", "1"],
        ["0", "1"],
        [1, 2],
        ["a", None],
    ]
    for bad in bad_options:
        with pytest.raises(ValueError):
            ClarifyArgs(question="Which?", options=bad)
    with pytest.raises(ValueError):
        ClarifyArgs(question=" \n ", options=["a", "b"])
    assert not ClarifyTool.parallel_safe


@pytest.mark.parametrize(
    "args",
    [
        {"question": "Which?", "options": [str(n) for n in range(1, 8)]},
        {"question": "Which?", "options": ["prod", "Prod"]},
        {"question": "Which?", "options": ["prod", "  "]},
        {"question": "Which?", "options": ["prod", 2]},
        {"question": "Which?", "options": ["prod", "x" * 76]},
        {"question": "", "options": ["a", "b"]},
        {"question": "Which?", "options": ["a", "b"], "approve": True},
    ],
)
async def test_bad_arguments_post_nothing_and_the_model_is_told_why(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, args: dict[str, Any]
) -> None:
    fake_openai.script = [calls(("call_q", "clarify", args)), reply("I will decide myself.")]
    runtime, channel = runtime_for(redis, workdir, fake_openai)
    result = await runtime.run("s1", "deploy it", ALICE, HERE)
    assert result.stop_reason is StopReason.FINAL and result.approval_id is None
    assert channel.of(ApprovalRequested) == []
    (told,) = tool_results(fake_openai, 1)
    assert told.startswith("invalid arguments for clarify: ")
    assert await runtime.pending() == []


async def test_digits_that_are_no_option_number_neither_answer_nor_crash(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    runtime, _, question_id = await asked(redis, workdir, fake_openai)
    told: list[str] = []

    async def say(text: str) -> None:
        told.append(text)

    for odd in ("²", "\u0661", "9" * 5000, "0", "3"):  # `str.isdigit`, but no option's number
        refused = await runtime.decide(question_id, Answer(odd), ALICE, HERE)
        assert not refused.accepted and "1. staging, 2. prod" in refused.message
        held = await dispatch(runtime, "s1", odd, ALICE, HERE, say)
        assert held is not None and held.held  # a message like any other: it waits
        assert told.pop() == (  # and the asker hears how to answer, privately
            f"Answer question {question_id} with one of: 1. staging, 2. prod. "
            "This message runs after the answer."
        )
    key = f"{PREFIX}:{{s1}}:approval:{question_id}"
    assert await redis.hget(key, "status") == "pending" and len(fake_openai.requests) == 1


async def test_the_terminal_shows_a_numbered_prompt_and_the_number_typed_answers(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [calls(("call_q", "clarify", ASK)), reply("Deploying to prod.")]
    runtime, _ = runtime_for(redis, workdir, fake_openai)
    out = io.StringIO()
    runtime.channel.channel = ConsoleChannel(out)  # the runtime's redacting channel, onto it
    chat = ConsoleChat(runtime, "console:local", ALICE, io.StringIO(), out)

    await chat.handle("deploy it")
    shown = out.getvalue()
    assert "[question for console:alice] Which environment?\n  1. staging\n  2. prod\n" in shown
    question_id = shown.split("(id ", 1)[1][:13]
    await chat.handle("2")

    assert tool_results(fake_openai, 1) == ["The requester answered: prod"]
    rest = out.getvalue()[len(shown) :]
    assert f"[question {question_id} answered by console:alice: prod]" in rest
    assert rest.rstrip().endswith("Deploying to prod.")


async def test_a_policy_deny_still_denies_a_question(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [calls(("call_q", "clarify", ASK)), reply("I will pick staging.")]
    document = PolicyDocument(tools=ToolRules(deny=["clarify"]))
    runtime, channel = runtime_for(redis, workdir, fake_openai, document=document)
    result = await runtime.run("s1", "deploy it", ALICE, HERE)
    assert result.stop_reason is StopReason.FINAL and result.approval_id is None
    assert channel.of(ApprovalRequested) == []
    (denied,) = tool_results(fake_openai, 1)
    assert "denied" in denied
