"""The model's Markdown answer as people see it, end to end: the real server, slack_sdk and
lark-oapi against the fakes, the real `openai` client against FakeOpenAI, a real Redis, and
`clawgate chat` in a pseudo-terminal. What a user would notice: a Slack markdown block and a
Feishu Markdown card (headings, bold, links, lists, tables, code), a code block never split
open, a 40 KB answer as one message plus the whole of it as a file, the same after a worker
was killed mid-upload, and a terminal that renders it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.feishu.cardkit import ANSWER as ANSWER_ID
from tests.e2e import test_feishu_serve as feishu
from tests.e2e.takeover import serve_then_worker, settled
from tests.e2e.test_chat_terminal import COLS, ROWS, PtyChat
from tests.e2e.test_slack_serve import CHANNEL, serving
from tests.fake_feishu import (
    CARDKIT_PATH,
    FakeFeishu,
    event_envelope,
    event_request,
    message_event,
    post,
)
from tests.fake_openai import FakeOpenAI, reply, streamed
from tests.fake_slack import FakeSlack, StoredMessage, event_body, mention_event, next_ts
from tests.processes import clean_env

pytestmark = pytest.mark.e2e  # real servers and processes: the slow tier

TOKEN = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
ANSWER = (
    "## Why the deploy failed\n\n"
    "The **registry token** expired on *Monday*; see [the runbook](https://wiki.example.com/rb) "
    "or ask <@U_CAROL> (not <!here>).\n\n"
    "1. renew the token\n2. rerun the job\n\n"
    "- staging: ok\n- prod: failed\n\n"
    "| env | status |\n|-----|--------|\n| staging | ok |\n| prod | failed |\n\n"
    "```bash\n"
    f"git remote set-url origin https://{TOKEN}@github.com/org/api.git\n"
    "kubectl rollout restart deploy/api\n"
    "```"
)
MASKED = ANSWER.replace(TOKEN, "[redacted]")  # what people may see of it
# A long answer: prose, then a code block far longer than one message.
CODE = "\n".join(f"step_{i:04d} = run(step_{i - 1:04d})  # keeps going" for i in range(1, 700))
LONG = "## The script\n\nHere it is whole:\n\n```python\n" + CODE + "\n```\n\nRun it twice."
# 40 KB of Markdown: many sections with lists and a little code each.
SECTION = (
    "### Host {n}\n\n- state: **degraded** since 04:{m:02d}\n- last deploy: `v1.{n}.0`\n\n"
    "```\njournalctl -u api --since -1h | tail -n 40\n```\n\n"
    "The disk filled up with logs; rotating them and restarting the service fixed it.\n\n"
)
FORTY_KB = "# Incident report\n\n" + "".join(SECTION.format(n=n, m=n % 60) for n in range(200))


def code_lines(texts: list[str]) -> list[str]:
    """The lines inside fenced code blocks, in order, over all `texts`."""
    lines: list[str] = []
    for text in texts:
        inside = False
        for line in text.split("\n"):
            if line.startswith("```"):
                inside = not inside
            elif inside:
                lines.append(line)
        assert not inside, f"a code block left open:\n{text[-300:]}"
    return lines


# ---------------------------------------------------------------------------------------------
# Slack
# ---------------------------------------------------------------------------------------------


def markdown_blocks(message: StoredMessage) -> list[str]:
    return [str(b["text"]) for b in message.blocks or [] if b.get("type") == "markdown"]


async def slack_answers(
    fake: FakeSlack,
    workdir: Path,
    redis_url: str,
    fake_openai: FakeOpenAI,
    text: str,
    **more: str,
) -> tuple[str, list[StoredMessage]]:
    """Serve Slack (with `more` settings) and mention the bot; once the run is done, the
    thread's ts and its answer messages as they stand (streamed, or posted)."""
    async with serving(fake, workdir, redis_url, **fake_openai.settings(**more)) as h:
        ts = next_ts()
        status, _ = await h.post(event_body(mention_event(text, ts=ts)))
        assert status == 200
        await fake.await_for(lambda: fake.answers(CHANNEL, ts), 15)
        await h.drained()
        return ts, fake.answers(CHANNEL, ts)


async def test_slack_a_markdown_answer_arrives_as_a_markdown_block(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [reply(ANSWER)]
    ts, (answer,) = await slack_answers(  # posted whole (unstreamed): with its plain text
        fake, workdir, redis_url, fake_openai, "why did the deploy fail?", CLAWGATE_STREAM="false"
    )
    (block,) = markdown_blocks(answer)
    # Standard Markdown, as written: Slack renders it. Only `<` is escaped (no mention, no
    # @here, no hidden link), the link shows its host, the token is masked.
    assert block == (
        MASKED.replace("[the runbook](", "[the runbook (wiki.example.com)](").replace("<", "&lt;")
    )
    assert "## Why the deploy failed" in block and "**registry token**" in block
    assert "| prod | failed |" in block and "```bash\n" in block and "1. renew" in block
    assert "[redacted]@github.com" in block and TOKEN[12:30] not in str(answer)
    # The notification text: the answer as plain message text, escaped.
    text = str(answer.text)
    assert text.startswith("## Why the deploy failed") and "&lt;@U_CAROL&gt;" in text
    assert not fake.files(CHANNEL, ts)  # short: no file


async def test_slack_a_long_code_block_is_never_split_open(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [reply(LONG)]
    ts, answers = await slack_answers(
        fake,
        workdir,
        redis_url,
        fake_openai,
        "write me the script",
        CLAWGATE_ANSWER_FILE_CHARS="0",  # all of it as messages
    )
    blocks = [text for call in answers for text in markdown_blocks(call)]
    assert len(blocks) >= 3 and all(len(b) <= 12_000 for b in blocks)
    assert code_lines(blocks) == CODE.split("\n")  # every line once, in order, all in code
    assert all(b.startswith("```python\n") for b in blocks[1:])  # reopened with its language
    assert blocks[0].startswith("## The script") and blocks[-1].endswith("Run it twice.")
    assert not fake.files(CHANNEL, ts)


async def test_slack_a_40_kb_answer_is_one_message_and_the_whole_of_it_as_a_file(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    assert len(FORTY_KB) > 40_000
    fake_openai.script = [reply(FORTY_KB)]
    ts, (answer,) = await slack_answers(
        fake, workdir, redis_url, fake_openai, "write up the incident"
    )
    (block,) = markdown_blocks(answer)
    (shared,) = fake.files(CHANNEL, ts)
    assert shared.data.decode() == FORTY_KB and shared.title == "The full answer"
    assert re.fullmatch(r"answer-[0-9a-f]{12}\.md", shared.name)
    assert block.startswith("# Incident report\n\n### Host 0") and len(block) < 2_000
    assert block.endswith(
        f"_The full answer ({len(FORTY_KB):,} characters) is in the attached file {shared.name}._"
    )
    assert code_lines([block])  # its beginning ends between blocks, no code block left open
    said = [m for m in fake.bot_messages(CHANNEL, ts) if not m.files]
    assert said == [answer]  # one message (streamed, then set to its beginning), and the file


async def test_slack_a_worker_killed_mid_upload_posts_the_answer_and_its_file_once(
    redis_url: str, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """kill -9 of `clawgate serve` while the long answer's file is being uploaded (the fake's
    upload URL is slow): a `clawgate worker` takes the run over and posts the answer again
    with `again`: the message that landed is found by its tag, the file uploaded once."""
    fake_openai.script = [reply(FORTY_KB)]
    async with FakeSlack() as fake:
        fake.upload_delay = 30.0
        async with serve_then_worker(fake, redis_url, workdir, **fake_openai.settings()) as run:
            event = mention_event("write up the incident", channel=CHANNEL)
            await run.post_to_slack(event)
            await fake.await_for(lambda: fake.uploading > 0, 30, what="the upload under way")
            await run.kill_serve()
            fake.upload_delay = 0.0
            await run.start_worker()

            await settled(fake, lambda: fake.files(CHANNEL, event["ts"]), "the file")
            (shared,) = fake.files(CHANNEL, event["ts"])
            assert shared.data.decode() == FORTY_KB
            answers = fake.answers(CHANNEL, event["ts"])
            assert len(answers) == 1, fake.describe()
            assert shared.name in markdown_blocks(answers[0])[0]
            assert len(fake.calls("files.getUploadURLExternal")) == 2  # the first never shared
            assert len(fake_openai.requests) == 1  # the answer was not asked for again


async def test_slack_a_worker_killed_mid_stream_finishes_that_message_never_a_second(
    redis_url: str, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """kill -9 of `clawgate serve` between two appends of a streamed answer: the `clawgate
    worker` that retakes the run has the model write the answer anew and finishes the
    half-written message with it (found by its mark: the bot's one message with no
    metadata, a stream never stopped); no second answer message, none left half-written."""
    story = "Once upon a time " + " ".join(f"word{i}" for i in range(60)) + ". The end."
    fake_openai.script = [streamed(story, chunks=30, delay=0.4), streamed(story, chunks=6, delay=0)]
    settings = fake_openai.settings()
    async with FakeSlack() as fake, serve_then_worker(fake, redis_url, workdir, **settings) as run:
        event = mention_event("tell me a story", channel=CHANNEL)
        await run.post_to_slack(event)

        def streaming() -> bool:
            return any(m.streaming and m.appends >= 2 for m in fake.answers(CHANNEL, event["ts"]))

        await fake.await_for(streaming, 30, what="the answer streaming")
        await run.kill_serve()
        (left,) = fake.answers(CHANNEL, event["ts"])
        assert left.streaming and story.startswith(str(left.text)) and left.text != story
        await run.start_worker()

        def finished() -> bool:
            return any(m.metadata for m in fake.answers(CHANNEL, event["ts"]))

        await settled(fake, finished, "the answer finished")
        (answer,) = fake.answers(CHANNEL, event["ts"])
        assert answer.ts == left.ts and not answer.streaming, fake.describe()
        assert markdown_blocks(answer) == [story]
        assert (answer.blocks or [])[-1]["type"] == "context_actions"  # 👍/👎
        others = [m for m in fake.bot_messages(CHANNEL, event["ts"]) if m.ts != answer.ts]
        assert ["Continuing" in str(m.text) for m in others] == [True], fake.describe()
        assert len(fake_openai.requests) == 2  # the answer was never recorded: asked again


# ---------------------------------------------------------------------------------------------
# Feishu
# ---------------------------------------------------------------------------------------------


def card_markdown(content: Any) -> str:
    assert content["schema"] == "2.0", content
    (element,) = content["body"]["elements"]
    assert element["tag"] == "markdown"
    return str(element["content"])


@dataclass
class FeishuAsked:
    """Feishu served against its fake, the model answering as FakeOpenAI is told."""

    fake: FakeFeishu
    workdir: Path
    redis_url: str
    fake_openai: FakeOpenAI

    async def answers(self, asked: str, answer: str, file_chars: str = "12000") -> list[Any]:
        """Ask in a group, the model answering `answer`; once done, the bot's messages in the
        thread."""
        self.fake_openai.script = [reply(answer)]
        settings = self.fake_openai.settings(CLAWGATE_ANSWER_FILE_CHARS=file_chars)
        fake = self.fake
        async with feishu.serving(fake, self.workdir, self.redis_url, **settings) as h:
            said = await h.say(asked)

            def cards() -> list[Any]:
                return [m for m in fake.messages(root_id=said.message_id) if m.markdown]

            await fake.await_for(cards, 15, what="the answer")
            await h.drained()
            return fake.messages(root_id=said.message_id)


@pytest.fixture
def feishu_asked(
    fake_feishu: FakeFeishu, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> FeishuAsked:
    return FeishuAsked(fake_feishu, workdir, redis_url, fake_openai)


async def test_feishu_a_markdown_answer_arrives_as_a_markdown_card(
    feishu_asked: FeishuAsked,
) -> None:
    messages = await feishu_asked.answers("why did the deploy fail?", ANSWER)
    (answer,) = [m for m in messages if m.msg_type == "interactive"]
    # Markdown as written for the card to render; outside code `<` is escaped (no <at>
    # mentions, no tags), the link shows its host, the token is masked, code as written.
    assert card_markdown(answer.content) == (
        MASKED.replace("[the runbook](", "[the runbook (wiki.example.com)](").replace(
            "<@U_CAROL> (not <!here>)", "&lt;@U_CAROL> (not &lt;!here>)"
        )
    )
    assert not [m for m in messages if m.msg_type in ("text", "file")]  # the card only
    assert TOKEN[12:30] not in answer.raw_content


async def test_feishu_a_long_code_block_is_never_split_open(feishu_asked: FeishuAsked) -> None:
    messages = await feishu_asked.answers("write me the script", LONG, file_chars="0")
    texts = [card_markdown(m.content) for m in messages if m.msg_type == "interactive"]
    assert len(texts) >= 3
    assert code_lines(texts) == CODE.split("\n")
    assert all(t.startswith("```python\n") for t in texts[1:])
    assert texts[-1].endswith("Run it twice.")


async def test_feishu_a_40_kb_answer_is_one_card_and_the_whole_of_it_as_a_file(
    feishu_asked: FeishuAsked,
) -> None:
    messages = await feishu_asked.answers("write up the incident", FORTY_KB)
    (upload,) = feishu_asked.fake.uploads()
    (card,) = [m for m in messages if m.msg_type == "interactive"]
    (filed,) = [m for m in messages if m.msg_type == "file"]
    assert filed.content == {"file_key": upload.key}
    assert upload.data.decode() == FORTY_KB and upload.type == "stream"
    text = card_markdown(card.content)
    assert text.startswith("# Incident report") and upload.name in text and len(text) < 2_000


async def test_feishu_a_worker_killed_mid_upload_sends_the_card_and_the_file_once(
    fake_feishu: FakeFeishu, redis_url: str, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """kill -9 of `clawgate serve` while the long answer's file is being uploaded to Feishu:
    a `clawgate worker` takes the run over; the card goes again with its uuid (dropped as a
    duplicate), the file is uploaded again and sent once."""
    fake_openai.script = [reply(FORTY_KB)]
    fake = fake_feishu
    fake.upload_delay = 30.0
    app_id, secret = fake.new_app()
    env = fake_openai.settings(
        FEISHU_APP_ID=app_id,
        FEISHU_APP_SECRET=secret,
        FEISHU_ENCRYPT_KEY=feishu.KEY,
        FEISHU_VERIFICATION_TOKEN=feishu.TOKEN,
        FEISHU_DOMAIN=fake.url,
    )
    async with serve_then_worker(None, redis_url, workdir, **env) as run:
        event = message_event("@_user_1 write up the incident", mentions=feishu.MENTION)
        asked = str(event["message"]["message_id"])
        envelope = event_envelope(feishu.MESSAGE, event, token=feishu.TOKEN)
        status, _ = await post(
            f"{run.url}/feishu/events", *event_request(envelope, encrypt_key=feishu.KEY)
        )
        assert status == 200
        await fake.await_for(lambda: fake.uploading > 0, 30, what="the upload under way")
        await run.kill_serve()
        fake.upload_delay = 0.0
        await run.start_worker()

        def files() -> list[Any]:
            return [m for m in fake.messages(root_id=asked) if m.msg_type == "file"]

        await settled(fake, files, "the file message")
        (filed,) = files()
        (card,) = [m for m in fake.messages(root_id=asked) if m.markdown]
        (upload,) = fake.uploads(filed.content["file_key"])
        assert upload.data.decode() == FORTY_KB and upload.name in str(card.markdown)
        assert any(c.duplicate for c in fake.replies(asked))  # the card, sent again, dropped
        assert len(fake_openai.requests) == 1


async def test_feishu_a_worker_killed_mid_stream_leaves_one_finished_card(
    fake_feishu: FakeFeishu, redis_url: str, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """kill -9 of `clawgate serve` while the answer streams into its card (between two
    updates): the `clawgate worker` retaking the run sends the card again with its uuid, gets
    the dead process's message back and finishes that card: one card, the whole answer,
    streaming off."""
    story = "Once upon a time " + " ".join(f"word{i}" for i in range(30)) + ". The end."
    fake_openai.script = [streamed(story, chunks=20, delay=0.3), streamed(story, 4, 0.05)]
    fake = fake_feishu
    app_id, secret = fake.new_app()
    env = fake_openai.settings(
        FEISHU_APP_ID=app_id,
        FEISHU_APP_SECRET=secret,
        FEISHU_ENCRYPT_KEY=feishu.KEY,
        FEISHU_VERIFICATION_TOKEN=feishu.TOKEN,
        FEISHU_DOMAIN=fake.url,
        CLAWGATE_RECLAIM_IDLE="1",  # the worker takes the job over at once
    )
    async with serve_then_worker(None, redis_url, workdir, **env) as run:
        event = message_event("@_user_1 tell me a story", mentions=feishu.MENTION)
        asked = str(event["message"]["message_id"])
        envelope = event_envelope(feishu.MESSAGE, event, token=feishu.TOKEN)
        status, _ = await post(
            f"{run.url}/feishu/events", *event_request(envelope, encrypt_key=feishu.KEY)
        )
        assert status == 200

        def typed() -> list[Any]:
            return [c for c in fake.calls(CARDKIT_PATH) if c.path.endswith("/answer/content")]

        await fake.await_for(lambda: len(typed()) >= 2, 30, what="the answer streaming")
        await run.kill_serve()
        (dead,) = fake.cards()
        assert dead.streaming and 0 < len(str(dead.content(ANSWER_ID))) < len(story)
        await run.start_worker()

        def finished() -> list[Any]:
            return [c for c in fake.cards() if not c.streaming and c.content(ANSWER_ID) == story]

        await settled(fake, finished, "the card finished")
        said = fake.messages(root_id=asked)
        (card,) = [m for m in said if m.msg_type == "interactive"]  # the dead process's card
        assert [m.msg_type for m in said] == ["interactive", "text"]  # and "Continuing…"
        assert card.msg_type == "interactive" and card.content == finished()[0].card
        assert finished()[0].card_id == dead.card_id
        assert card.markdown == story
        assert len(fake_openai.requests) == 2  # the answer was asked for again


# ---------------------------------------------------------------------------------------------
# The terminal
# ---------------------------------------------------------------------------------------------


async def test_the_terminal_renders_the_markdown_answer(
    workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [reply(ANSWER)]
    env = clean_env(**fake_openai.settings(CLAWGATE_MODEL="fake-model", CLAWGATE_STREAM="false"))
    chat = PtyChat(workdir, env)
    try:
        await chat.prompt()
        chat.child.send("why did the deploy fail?\r")
        await chat.line_matching(r"kubectl rollout restart deploy/api")
        await chat.prompt()
        lines = [line.strip() for line in chat.lines()]
        shown = "\n".join(lines)
        assert "Why the deploy failed" in lines  # a heading, its marks gone
        assert "## " not in shown and "**" not in shown and "```" not in shown
        assert any(re.fullmatch(r"[•●] prod: failed", line) for line in lines), shown
        assert any(line.startswith("1 renew the token") for line in lines), shown
        # The link shows its URL; the table has its cells in columns; the token is masked.
        assert "the runbook (https://wiki.example.com/rb)" in shown
        assert re.search(r"prod\s+│?\s*failed", shown), shown
        assert "https://[redacted]@github.com/org/api.git" in shown
        assert TOKEN[12:30] not in "".join(chat.raw)
        assert "^[" not in shown  # every escape sequence was a style the terminal took
        screen = chat.screen.buffer
        bold = "".join(
            screen[y][x].data for y in range(ROWS) for x in range(COLS) if screen[y][x].bold
        )
        assert "registry token" in bold
        chat.child.send("\x04")
        assert await chat.exit_code() == 0
    finally:
        chat.kill()
