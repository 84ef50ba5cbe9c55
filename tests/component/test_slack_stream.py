"""A Slack answer as people see it: one message, streamed as the model writes it, the
assistant status while tools run, feedback buttons at the end; where the workspace refuses
streaming, the same message posted early and edited; a retake finishing the message a dead
process left. The real runtime, openai client and slack_sdk against the fakes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.slack import stream
from adapters.slack.answers import FEEDBACK, markdown_text
from adapters.slack.channel import SlackChannel, web_client
from adapters.slack.text import escape
from runtime.channel import Notice, Reply, ToolStarted, Writing
from runtime.models import ConversationRef
from runtime.providers.openai_provider import OpenAIProvider
from tests import support
from tests.fake_openai import FakeOpenAI, calls, streamed
from tests.fake_slack import FakeSlack

THREAD = "1700000000.000001"
HERE = ConversationRef(
    platform="slack",
    id="slack:T111:C111",
    data={"channel": "C111", "thread_ts": THREAD, "user": "U_ALICE"},
)
ANSWER = (
    "The file **notes.txt** says the deploy is on Friday, after the review; "
    "the staging check runs on Thursday night and the numbers come on Monday."
)


@pytest.fixture
def quick_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slack's pace (an append every 0.5 s, an edit every 1 s) at a fifth, for speed."""
    monkeypatch.setattr(stream, "APPEND_INTERVAL", stream.APPEND_INTERVAL / 5)
    monkeypatch.setattr(stream, "EDIT_INTERVAL", stream.EDIT_INTERVAL / 5)


async def tool_using_answer(
    redis: aioredis.Redis,
    workdir: Path,
    fake: FakeOpenAI,
    channel: SlackChannel,
    read: bool = True,
) -> None:
    """A read of notes.txt (unless not `read`: a plain answer), then ANSWER written in 8
    pieces 0.08 s apart (with `quick_pace`: several appends and edits, as 0.4 s apart at
    Slack's pace)."""
    (workdir / "notes.txt").write_text("deploy on Friday\n")
    fake.script = [
        *([calls(("call_1", "read", {"path": "notes.txt"}))] if read else []),
        streamed(ANSWER, chunks=8, delay=0.08),
    ]
    provider = OpenAIProvider("fake-model", api_key="sk-test", base_url=fake.base_url, stream=True)
    runtime, _ = support.make_runtime(redis, workdir, provider)
    runtime.channel.channel = channel  # the runtime's redacting channel, onto this adapter
    runtime.channel.interval /= 5  # previews at the pace of `quick_pace`
    result = await runtime.run("s1", "when is the deploy?", support.ALICE, HERE)
    assert result.final_text == ANSWER


def feedback_of(blocks: list[dict[str, object]] | None) -> list[object]:
    return [
        element
        for block in blocks or []
        if block.get("type") == "context_actions"
        for element in block.get("elements", [])  # type: ignore[attr-defined]
        if element.get("action_id") == FEEDBACK
    ]


@pytest.mark.usefixtures("quick_pace")
async def test_a_tool_using_answer_is_one_message_streamed_with_the_status_meanwhile(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, slack: FakeSlack
) -> None:
    channel = SlackChannel(web_client("xoxb-test", slack.base_url))
    await tool_using_answer(redis, workdir, fake_openai, channel)
    (answer,) = slack.bot_messages("C111", THREAD)  # no "Working…", no second copy
    assert answer.text == markdown_text(ANSWER) and not answer.streaming
    # Grew while written: at least one append before the last (a loaded machine may merge more).
    assert answer.appends >= 2, slack.describe()
    (start,) = slack.calls("chat.startStream")
    assert start.params["recipient_user_id"] == "U_ALICE"
    assert start.params["recipient_team_id"] == "T111"
    assert len(feedback_of(answer.blocks)) == 1
    assert answer.metadata is not None
    assert slack.posts("C111") == [] and slack.updates("C111") == []
    assert slack.statuses("C111", THREAD) == ["Running read…", ""]


@pytest.mark.usefixtures("quick_pace")
async def test_a_plain_answer_never_touches_the_threads_status(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, slack: FakeSlack
) -> None:
    """No tool ran, so no status was set: none is cleared either (one Slack call a turn)."""
    channel = SlackChannel(web_client("xoxb-test", slack.base_url))
    await tool_using_answer(redis, workdir, fake_openai, channel, read=False)
    (answer,) = slack.bot_messages("C111", THREAD)
    assert answer.text == markdown_text(ANSWER) and not answer.streaming
    assert slack.attempts("assistant.threads.setStatus") == []


@pytest.mark.usefixtures("quick_pace")
async def test_where_streaming_is_refused_the_answer_is_posted_once_and_edited(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, slack: FakeSlack
) -> None:
    slack.refuse_streaming = "not_allowed"
    channel = SlackChannel(web_client("xoxb-test", slack.base_url))
    await tool_using_answer(redis, workdir, fake_openai, channel)
    (answer,) = slack.bot_messages("C111", THREAD)
    assert answer.text == escape(ANSWER)
    assert answer.blocks is not None and answer.blocks[0]["text"] == markdown_text(ANSWER)
    assert len(feedback_of(answer.blocks)) == 1
    assert answer.edits >= 2, slack.describe()  # grew while written, then the final answer
    assert not any("Working" in str(c.params.get("text")) for c in slack.posts("C111"))
    assert slack.statuses("C111", THREAD) == ["Running read…", ""]
    # Refused once: the next answer in this process does not ask again.
    await channel.send(HERE, Writing("A second answer is being written"))
    await channel.send(HERE, Reply("A second answer is being written here.", key="k2"))
    assert len(slack.attempts("chat.startStream")) == 1
    assert [m.text for m in slack.bot_messages("C111", THREAD)][1] == (
        "A second answer is being written here."
    )


@pytest.mark.usefixtures("quick_pace")
async def test_a_rate_limited_status_pauses_the_previews_not_the_answer(slack: FakeSlack) -> None:
    """A 429 on the thread's status holds the other calls tried once (appends, edits) for
    what Slack said, as a 429 on any of them does; the final answer is whole all the same."""
    channel = SlackChannel(web_client("xoxb-test", slack.base_url))
    slack.fail_next("assistant.threads.setStatus", retry_after=30)
    await channel.send(HERE, ToolStarted("call_1", "read", "notes.txt"))
    await channel.send(HERE, Writing("The file says the deploy"))
    for more in (" is on", " is on Friday", " is on Friday, after"):
        await asyncio.sleep(stream.APPEND_INTERVAL * 1.5)  # an append is due each time
        await channel.send(HERE, Writing("The file says the deploy" + more))
    await channel.send(HERE, Reply(ANSWER, key="answer/s1/1"))
    (answer,) = slack.bot_messages("C111", THREAD)
    assert answer.appends == 0, slack.describe()  # paused: not even tried
    assert answer.blocks is not None and answer.blocks[0]["text"] == markdown_text(ANSWER)
    assert len(slack.attempts("assistant.threads.setStatus")) == 1


@pytest.mark.parametrize("again", [True, False], ids=["answer recorded", "model asked again"])
async def test_a_retake_finishes_the_stream_a_dead_process_left(
    slack: FakeSlack, again: bool
) -> None:
    """A process died mid-stream; the retake (another process) either posts the recorded
    answer `again` or has the model write it anew after its Notice: either way the one
    message is finished as the whole answer, never posted twice."""
    dead = SlackChannel(web_client("xoxb-test", slack.base_url))
    await dead.send(HERE, Writing("The file says the deploy"))
    await dead.send(HERE, Writing("The file says the deploy is on"))
    (left,) = slack.bot_messages("C111", THREAD)
    assert left.streaming

    retake = SlackChannel(web_client("xoxb-test", slack.base_url))
    await retake.send(HERE, Notice("Continuing where I stopped"))
    if not again:
        await retake.send(HERE, Writing("The file says"))
    await retake.send(HERE, Reply(ANSWER, key="answer/s1/3", again=again))
    answer, notice = slack.bot_messages("C111", THREAD)  # the answer began before
    assert "Continuing" in str(notice.text)
    assert answer.ts == left.ts and not answer.streaming
    assert answer.blocks is not None and answer.blocks[0]["text"] == markdown_text(ANSWER)
    assert len(feedback_of(answer.blocks)) == 1
    # Delivered once more (the retake retaken): found by its tag, nothing changes.
    edits = answer.edits
    await SlackChannel(web_client("xoxb-test", slack.base_url)).send(
        HERE, Reply(ANSWER, key="answer/s1/3", again=True)
    )
    assert len(slack.bot_messages("C111", THREAD)) == 2
    stored = slack.message("C111", left.ts)
    assert stored is not None and stored.edits == edits


async def test_a_stream_slack_started_but_answered_with_an_error_is_the_one_finished(
    slack: FakeSlack,
) -> None:
    """chat.startStream acted on, its answer an internal error: the next words look for the
    stream first and go on in it; the answer ends there, not in a second message."""
    slack.error_next("chat.startStream", "internal_error", after=True)
    channel = SlackChannel(web_client("xoxb-test", slack.base_url))
    await channel.send(HERE, Writing("The file says"))
    await channel.send(HERE, Writing("The file says the deploy"))
    await channel.send(HERE, Reply(ANSWER, key="answer/s1/3"))
    (answer,) = slack.bot_messages("C111", THREAD)
    assert not answer.streaming and answer.blocks is not None
    assert answer.blocks[0]["text"] == markdown_text(ANSWER)
    assert len(slack.attempts("chat.startStream")) == 1 and slack.posts("C111") == []
