"""Previews of an answer being written, as the chat adapters send them: the real slack_sdk and
lark-oapi against the fake platforms, the throttle interval set to 0 so every piece counts.
A streamed answer with a secret in it is redacted in every preview and in the answer, through
the runtime, on each platform and in the terminal."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.console.channel import ConsoleChannel
from adapters.feishu.channel import MAX_EDITS, PREVIEW_EDITS, FeishuChannel, feishu_client
from adapters.slack.channel import SlackChannel, web_client
from runtime.channel import Channel, Reply, RunFinished, ToolStarted, Writing
from runtime.models import ConversationRef, StopReason
from runtime.providers.openai_provider import OpenAIProvider
from tests import support
from tests.fake_feishu import CARDKIT_PATH, FakeFeishu
from tests.fake_openai import FakeOpenAI, reply
from tests.fake_slack import FakeSlack

THREAD = "1700000000.000001"
SLACK_HERE = ConversationRef(
    platform="slack",
    id=f"slack:T111:C111:{THREAD}",
    data={"channel": "C111", "thread_ts": THREAD, "user": "U_ALICE"},
)
FEISHU_HERE = ConversationRef(
    platform="feishu", id="feishu:tenant:oc_chat1", data={"chat_id": "oc_chat1"}
)
DONE = RunFinished(StopReason.FINAL, 2)


async def test_slack_edits_pause_when_rate_limited_and_the_end_still_shows(
    slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workspace without streaming: the answer is posted at its first words and edited as
    it grows, each edit tried once; the final answer waits a rate limit out."""
    monkeypatch.setattr("adapters.slack.stream.EDIT_INTERVAL", 0.0)
    slack.refuse_streaming = "not_allowed"
    channel = SlackChannel(web_client("xoxb-test", slack.base_url))
    await channel.send(SLACK_HERE, Writing("Once"))  # posts the answer's message
    (posted,) = slack.posts("C111", THREAD)
    ts = str(posted.response["ts"])
    slack.fail_next("chat.update", status=429, retry_after=1)
    await channel.send(SLACK_HERE, Writing("Once upon"))  # rate limited: tried once
    await channel.send(SLACK_HERE, Writing("Once upon a time"))  # edits paused: not tried
    await channel.send(SLACK_HERE, Reply("Once upon a time, the end."))  # goes through
    await channel.send(SLACK_HERE, DONE)
    assert [a.status for a in slack.attempts("chat.update")] == [429, 200]
    stored = slack.message("C111", ts)
    assert stored is not None and stored.text == "Once upon a time, the end."
    assert posted.params["text"] == "Once" and slack.posts("C111", THREAD) == [posted]


async def test_feishu_previews_keep_edits_for_the_tools_and_the_end(feishu: FakeFeishu) -> None:
    """Without streaming cards (FEISHU_STREAMING_CARDS=false, or refused): a text message."""
    app_id, secret = feishu.new_app()
    channel = FeishuChannel(feishu_client(app_id, secret, feishu.url), app_id, cards=False)
    channel._progress.interval = 0.0
    text = ""
    for i in range(30):
        text += f"word{i} "
        await channel.send(FEISHU_HERE, Writing(text))
    (working,) = feishu.sends("oc_chat1")
    assert working.message_id is not None
    assert len(feishu.updates(working.message_id)) == PREVIEW_EDITS  # previews stop there
    for i in range(10):
        await channel.send(FEISHU_HERE, ToolStarted(f"c{i}", "read", f"file{i}.txt"))
    await channel.send(FEISHU_HERE, DONE)
    edits = feishu.updates(working.message_id)
    assert len(edits) == MAX_EDITS  # Feishu's limit, the last one kept for the end
    assert [e.text for e in edits[PREVIEW_EDITS : PREVIEW_EDITS + 2]] == [
        "Working…\n⏳ read: file0.txt",
        "Working…\n⏳ read: file0.txt\n⏳ read: file1.txt",
    ]
    assert str(edits[-1].text).endswith("Done") and "word" not in str(edits[-1].text)


async def test_the_terminal_chat_shows_no_preview() -> None:
    out = io.StringIO()
    await ConsoleChannel(out).send(FEISHU_HERE, Writing("Once upon a time"))
    assert out.getvalue() == ""


# --- a secret in a streamed answer -------------------------------------------------------------

SECRET = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
LEAKY = (
    "Your remote is set: origin https://" + SECRET + "@github.com/org/repo.git (fetch), "
    "and the push URL is the same one, so pushing should work as it is."
)
# Every 6 characters of the secret's random part: none may show, in any piece of any text.
PARTS = [SECRET[i : i + 6] for i in range(len("github_pat_"), len(SECRET) - 5)]


async def streamed_run(
    redis: aioredis.Redis, workdir: Path, fake: FakeOpenAI, channel: Channel, where: ConversationRef
) -> None:
    """LEAKY answered through the runtime in 40 pieces (the secret across a dozen of them),
    delivered by `channel`."""
    step = reply(LEAKY)
    step.chunks = 40
    fake.script = [step]
    provider = OpenAIProvider("fake-model", api_key="sk-test", base_url=fake.base_url, stream=True)
    runtime, _ = support.make_runtime(redis, workdir, provider)
    runtime.channel.channel = channel  # the runtime's redacting channel, onto this adapter
    runtime.channel.interval = 0.0  # every piece passed on: the fake writes them at once
    result = await runtime.run("leak", "what is my remote?", support.ALICE, where)
    assert result.final_text == LEAKY  # the model's own answer, kept as it was


def assert_redacted(texts: list[str]) -> None:
    """No part of the secret in any text; the answer (the last text) with the mask."""
    leaked = [(part, text) for text in texts for part in PARTS if part in text]
    assert not leaked, leaked[:3]
    assert "origin https://[redacted]@github.com/org/repo.git" in texts[-1]


async def test_a_secret_in_a_streamed_answer_is_redacted_on_slack(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    slack: FakeSlack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("adapters.slack.stream.APPEND_INTERVAL", 0.0)
    channel = SlackChannel(web_client("xoxb-test", slack.base_url))
    await streamed_run(redis, workdir, fake_openai, channel, SLACK_HERE)
    streamed = [
        str(c.params.get("markdown_text") or "")
        for c in slack.calls()
        if c.method in ("chat.startStream", "chat.appendStream", "chat.stopStream")
    ]
    assert len(streamed) >= 4, slack.describe()
    (answer,) = slack.bot_messages("C111", THREAD)
    texts = ["".join(streamed[: i + 1]) for i in range(len(streamed))]
    assert sum("https://[redacted]@" in text for text in texts) >= 3, texts
    assert_redacted([*texts, str(answer.text)])


async def test_a_secret_in_a_streamed_answer_is_redacted_on_feishu(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, feishu: FakeFeishu
) -> None:
    app_id, secret = feishu.new_app()
    channel = FeishuChannel(feishu_client(app_id, secret, feishu.url), app_id)
    assert channel._streams is not None
    channel._streams.interval = 0.0
    await streamed_run(redis, workdir, fake_openai, channel, FEISHU_HERE)
    (answer,) = feishu.messages("oc_chat1")  # one card, streamed
    previews = [
        str(c.get("content")) for c in feishu.calls(CARDKIT_PATH) if c.kind == "card_content"
    ]
    assert sum("https://[redacted]@" in text for text in previews) >= 3, previews
    assert answer.msg_type == "interactive"  # the answer is a card of Markdown
    assert_redacted([*previews, str(answer.markdown)])


async def test_a_secret_in_a_streamed_answer_is_redacted_in_the_terminal(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    out = io.StringIO()
    await streamed_run(redis, workdir, fake_openai, ConsoleChannel(out), support.HERE)
    assert_redacted([out.getvalue()])
