"""The answer streamed into one CardKit card (adapters/feishu/stream.py), through the real
lark-oapi against the fake Feishu: thinking, tool lines and the answer in one card updated in
place, closed with the answer as said; waiting for approval and going on in the same card; a
card a dead process left taken over, never doubled; the text working message where cards are
refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from adapters.feishu.answers import markdown_text
from adapters.feishu.cardkit import ANSWER, STEPS
from adapters.feishu.channel import FeishuChannel, feishu_client
from runtime.channel import Reply, RunFinished, ToolFinished, ToolStarted, Writing
from runtime.models import ConversationRef, StopReason, ToolStatus
from runtime.providers.openai_provider import OpenAIProvider
from tests import support
from tests.fake_feishu import CARDKIT_PATH, CardEntity, FakeFeishu, find_element
from tests.fake_openai import FakeOpenAI, calls, reply

HERE = ConversationRef(
    platform="feishu",
    id="feishu:tenant:oc_chat1",
    data={"chat_id": "oc_chat1", "message_id": "om_question", "thread": "1"},
)
ANSWER_TEXT = "The notes say: **ship it** on Friday."


def channels(feishu: FakeFeishu, count: int = 1, cards: bool = True) -> list[FeishuChannel]:
    """`count` processes' channels of one app, throttle off (every update counts)."""
    app_id, secret = feishu.new_app()
    made = []
    for _ in range(count):
        channel = FeishuChannel(feishu_client(app_id, secret, feishu.url), app_id, cards=cards)
        if channel._streams is not None:
            channel._streams.interval = 0.0
        made.append(channel)
    return made


def element(card: dict[str, Any], element_id: str) -> str | None:
    found = find_element(card, element_id)
    return None if found is None else str(found["content"])


def shown_card(feishu: FakeFeishu) -> tuple[dict[str, Any], CardEntity]:
    """The one message in the thread, a card entity's: what it shows, the entity."""
    (message,) = feishu.messages(root_id="om_question")
    (convert,) = {c.response["data"]["card_id"] for c in feishu.calls(f"{CARDKIT_PATH}/id_")}
    entity = feishu.card(convert)
    assert entity is not None and message.content == entity.card
    return message.content, entity


async def test_a_tool_using_answer_is_one_card_updated_in_place(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, feishu: FakeFeishu
) -> None:
    (workdir / "notes.txt").write_text("ship it on Friday\n")
    answer = reply(ANSWER_TEXT)
    answer.chunks = 6
    fake_openai.script = [calls(("call_1", "read", {"path": "notes.txt"})), answer]
    provider = OpenAIProvider(
        "fake-model", api_key="sk-test", base_url=fake_openai.base_url, stream=True
    )
    runtime, _ = support.make_runtime(redis, workdir, provider)
    (channel,) = channels(feishu)
    runtime.channel.channel = channel
    runtime.channel.interval = 0.0
    result = await runtime.run("s1", "what do the notes say?", support.ALICE, HERE)
    assert result.final_text == ANSWER_TEXT

    (message,) = feishu.messages(root_id="om_question")  # one message: the card, nothing else
    assert message.msg_type == "interactive" and message.parent_id == "om_question"
    (entity,) = feishu.cards()
    states = [(element(c, STEPS), element(c, ANSWER)) for c in entity.history]
    assert states[0] == ("💭 Thinking…", "")  # made at the run's first event
    assert any(steps and steps.startswith("⏳ read") for steps, _ in states)
    assert any(steps and steps.startswith("✅ read") and "Thinking" in steps for steps, _ in states)
    previews = [a for _, a in states if a and a != markdown_text(ANSWER_TEXT)]
    assert previews and all(markdown_text(ANSWER_TEXT).startswith(p) for p in previews)
    assert len(set(states)) >= 4  # thinking, the tool running, done, the answer being written
    assert not entity.streaming and message.content == entity.card
    assert element(entity.card, ANSWER) == markdown_text(ANSWER_TEXT)
    assert str(element(entity.card, STEPS)).startswith("✅ read: ")
    assert all(c.ok for c in feishu.attempts(CARDKIT_PATH))  # sequences grew, ids held


async def test_waiting_for_approval_closes_the_card_and_the_resumed_part_goes_on_in_it(
    feishu: FakeFeishu,
) -> None:
    first, other = channels(feishu, 2)
    await first.send(HERE, ToolStarted("c1", "bash", "rm victim.txt"))
    await first.send(HERE, ToolFinished("c1", "bash", ToolStatus.SUSPENDED, "waits for ab12"))
    await first.send(HERE, RunFinished(StopReason.APPROVAL_REQUIRED, 1))
    card, entity = shown_card(feishu)
    assert not entity.streaming
    assert element(card, STEPS) == "🔒 bash: waits for ab12"  # folded under "1 tool call"
    assert {"tag": "markdown", "content": "🔒 Waiting for approval"} in card["body"]["elements"]
    # Approved; the run goes on in another process, in the same card.
    await other.send(HERE, ToolFinished("c1", "bash", ToolStatus.COMPLETED, "removed"))
    await other.send(HERE, Writing("Removed"))
    await other.send(HERE, Reply("Removed victim.txt.", key="answer/s/4"))
    await other.send(HERE, RunFinished(StopReason.FINAL, 2))
    card, entity = shown_card(feishu)
    assert not entity.streaming
    assert (element(card, STEPS), element(card, ANSWER)) == (
        "✅ bash: removed",
        "Removed victim.txt.",
    )


async def test_a_card_a_dead_process_left_is_finished_by_the_retake_never_doubled(
    feishu: FakeFeishu,
) -> None:
    dead, retake = channels(feishu, 2)
    await dead.send(HERE, ToolStarted("c1", "read", "notes.txt"))
    await dead.send(HERE, ToolFinished("c1", "read", ToolStatus.COMPLETED, "3 lines"))
    await dead.send(HERE, Writing("The notes say: **sh"))  # killed here, streaming
    # The answer was recorded before the crash: the retake posts it again.
    await retake.send(HERE, Reply(ANSWER_TEXT, key="answer/s/3", again=True))
    await retake.send(HERE, RunFinished(StopReason.FINAL, 2))
    card, entity = shown_card(feishu)
    assert not entity.streaming and element(card, ANSWER) == markdown_text(ANSWER_TEXT)
    assert [c.duplicate for c in feishu.replies("om_question")] == [False, True]


async def test_a_retake_that_writes_the_answer_again_streams_into_the_dead_process_card(
    feishu: FakeFeishu,
) -> None:
    dead, retake = channels(feishu, 2)
    await dead.send(HERE, Writing("The notes"))  # killed while the model wrote
    for text in ("The", "The notes say", ANSWER_TEXT):  # asked again by the retake
        await retake.send(HERE, Writing(text))
    await retake.send(HERE, Reply(ANSWER_TEXT, key="answer/s/3"))
    await retake.send(HERE, RunFinished(StopReason.FINAL, 1))
    card, entity = shown_card(feishu)
    assert not entity.streaming and element(card, ANSWER) == markdown_text(ANSWER_TEXT)
    assert markdown_text("The notes say") in [element(c, ANSWER) for c in entity.history]


async def test_cards_refused_fall_back_to_the_text_working_message(feishu: FakeFeishu) -> None:
    feishu.fail_next("card_create", code=99991672, http_status=400, msg="no cardkit:card:write")
    (channel,) = channels(feishu)
    await channel.send(HERE, ToolStarted("c1", "read", "notes.txt"))
    await channel.send(HERE, ToolFinished("c1", "read", ToolStatus.COMPLETED, "3 lines"))
    await channel.send(HERE, Reply(ANSWER_TEXT, key="answer/s/3"))
    await channel.send(HERE, RunFinished(StopReason.FINAL, 2))
    working, answer = feishu.messages(root_id="om_question")
    assert working.text == "✅ read: 3 lines\nDone"  # finished, not left "Working…"
    assert answer.markdown == markdown_text(ANSWER_TEXT) and feishu.cards() == []
    # The next run tries cards again.
    await channel.send(HERE, Writing("Hello"))
    assert len(feishu.cards()) == 1


async def test_streaming_cards_turned_off_keep_the_text_working_message(
    feishu: FakeFeishu,
) -> None:
    (channel,) = channels(feishu, cards=False)
    await channel.send(HERE, ToolStarted("c1", "read", "notes.txt"))
    await channel.send(HERE, Reply(ANSWER_TEXT, key="answer/s/3"))
    await channel.send(HERE, RunFinished(StopReason.FINAL, 2))
    working, answer = feishu.messages(root_id="om_question")
    assert working.text == "⏳ read: notes.txt\nDone" and answer.msg_type == "interactive"
    assert feishu.calls(CARDKIT_PATH) == []


async def test_a_card_that_cannot_be_finished_is_recalled_and_the_answer_posted(
    feishu: FakeFeishu,
) -> None:
    (channel,) = channels(feishu)
    await channel.send(HERE, Writing("The notes"))
    feishu.fail_next("card_settings", code=300309, http_status=400, msg="card closed")
    await channel.send(HERE, Reply(ANSWER_TEXT, key="answer/s/3"))
    await channel.send(HERE, RunFinished(StopReason.FINAL, 1))
    (answer,) = feishu.messages(root_id="om_question")  # the half-written card was recalled
    assert answer.markdown == markdown_text(ANSWER_TEXT)
    assert len(feishu.messages(root_id="om_question", include_deleted=True)) == 2


async def test_tool_lines_cannot_mention_anyone(feishu: FakeFeishu) -> None:
    (channel,) = channels(feishu)
    await channel.send(HERE, ToolStarted("c1", "bash", "echo <at id=all></at>"))
    await channel.send(HERE, Reply("Done.", key="answer/s/2"))
    card, _ = shown_card(feishu)
    assert element(card, STEPS) == "⏳ bash: echo &lt;at id=all>&lt;/at>"
    assert "<at" not in json.dumps(card)


async def test_a_card_that_cannot_be_taken_over_is_recalled_and_the_answer_posted(
    feishu: FakeFeishu,
) -> None:
    dead, retake = channels(feishu, 2)
    await dead.send(HERE, Writing("The notes"))  # killed while the model wrote
    for _ in range(2):  # the takeover's first try, and the one that skips numbers
        feishu.fail_next("card_settings", code=300309, http_status=400, msg="card closed")
    await retake.send(HERE, Reply(ANSWER_TEXT, key="answer/s/3", again=True))
    (answer,) = feishu.messages(root_id="om_question")  # the dead card recalled
    assert answer.markdown == markdown_text(ANSWER_TEXT) and answer.msg_type == "interactive"
    assert len(feishu.messages(root_id="om_question", include_deleted=True)) == 2


async def test_without_the_card_read_permission_a_retake_patches_the_message_whole(
    feishu: FakeFeishu,
) -> None:
    dead, retake = channels(feishu, 2)
    await dead.send(HERE, Writing("The notes"))  # killed while the model wrote
    feishu.fail_next("card_id_convert", code=99991672, http_status=400, msg="no cardkit:card:read")
    await retake.send(HERE, Reply(ANSWER_TEXT, key="answer/s/3", again=True))
    (message,) = feishu.messages(root_id="om_question")
    assert message.markdown == markdown_text(ANSWER_TEXT)
    assert message.content["config"]["streaming_mode"] is False
    assert [c.target_id for c in feishu.patches()] == [message.message_id]


async def test_calls_that_start_together_open_one_card(feishu: FakeFeishu) -> None:
    """Parallel reads emit their starts at once: the first events of a run, both for a place
    with no card yet, still make one card holding both lines."""
    (channel,) = channels(feishu)
    started = [ToolStarted(f"c{i}", "read", f"notes{i}.txt") for i in range(3)]
    await asyncio.gather(*(channel.send(HERE, event) for event in started))
    await channel.send(HERE, RunFinished(StopReason.ERROR, 1, error="stopped here"))

    (message,) = feishu.messages(root_id="om_question")
    assert len(feishu.cards()) == 1  # no second card made, none taken over
    steps = str(element(feishu.shown(message.message_id), STEPS))
    assert all(f"notes{i}.txt" in steps for i in range(3)), steps
