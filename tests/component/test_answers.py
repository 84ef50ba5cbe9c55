"""Answers through the chat adapters' channels, against the fake platforms with the real
slack_sdk and lark-oapi: a long answer's message and file land once through a retake and
through a failure after which Slack had shared the file anyway; a Markdown block Slack or a
card Feishu refuses is said as text rather than lost."""

from __future__ import annotations

from adapters.feishu.channel import FeishuChannel, feishu_client
from adapters.slack.channel import SlackChannel, web_client
from runtime.channel import Reply
from tests.component.test_previews import FEISHU_HERE, SLACK_HERE, THREAD
from tests.fake_feishu import FakeFeishu
from tests.fake_slack import FakeSlack

LONG = "# Report\n\n" + "".join(
    f"## Part {n}\n\nEverything about part {n}, in **some** detail.\n\n```\nstep {n}\n```\n\n"
    for n in range(400)
)  # about 28,000 characters: past the 12,000 of CLAWGATE_ANSWER_FILE_CHARS
ANSWER = Reply(LONG, key="run-7/answer")
RETAKEN = Reply(LONG, key="run-7/answer", again=True)


def slack_channel(slack: FakeSlack) -> SlackChannel:
    return SlackChannel(web_client("xoxb-test", slack.base_url))


async def test_slack_a_retaken_long_answer_posts_neither_message_nor_file_again(
    slack: FakeSlack,
) -> None:
    channel = slack_channel(slack)
    await channel.send(SLACK_HERE, ANSWER)
    await channel.send(SLACK_HERE, RETAKEN)  # the run retaken after a crash: all had landed
    (posted,) = slack.posts("C111", THREAD)
    (shared,) = slack.files("C111", THREAD)
    assert shared.data.decode() == LONG and shared.name in str(posted.params["blocks"])
    assert len(slack.calls("files.getUploadURLExternal")) == 1


async def test_slack_a_share_slack_made_but_answered_with_an_error_is_not_made_again(
    slack: FakeSlack,
) -> None:
    slack.error_next("files.completeUploadExternal", "internal_error", after=True)
    await slack_channel(slack).send(SLACK_HERE, ANSWER)
    (shared,) = slack.files("C111", THREAD)  # found in the thread, not uploaded again
    assert shared.data.decode() == LONG
    assert len(slack.attempts("files.completeUploadExternal")) == 1


def feishu_channel(feishu: FakeFeishu) -> FeishuChannel:
    app_id, secret = feishu.new_app()
    return FeishuChannel(feishu_client(app_id, secret, feishu.url), app_id)


async def test_feishu_a_retaken_long_answer_posts_neither_card_nor_file_again(
    feishu: FakeFeishu,
) -> None:
    app_id, secret = feishu.new_app()
    channel = FeishuChannel(feishu_client(app_id, secret, feishu.url), app_id)
    await channel.send(FEISHU_HERE, ANSWER)
    await channel.send(FEISHU_HERE, RETAKEN)
    other = FeishuChannel(feishu_client(app_id, secret, feishu.url), app_id)
    await other.send(FEISHU_HERE, RETAKEN)  # and by another process
    card, filed = feishu.messages("oc_chat1")
    assert card.msg_type == "interactive" and filed.msg_type == "file"
    assert card.markdown is not None and card.markdown.startswith("# Report")
    assert card.content["config"]["streaming_mode"] is False
    uploads = feishu.uploads()
    assert filed.content == {"file_key": uploads[0].key}
    assert all(u.data.decode() == LONG for u in uploads)  # uploaded again, never sent again
    duplicates = [False, False, True, True, True, True]  # the card and the file, each time
    assert [c.duplicate for c in feishu.sends("oc_chat1")] == duplicates


async def test_feishu_a_card_feishu_refuses_is_said_as_text(feishu: FakeFeishu) -> None:
    feishu.fail_next("card_create", code=200850, http_status=400, msg="card disabled")
    feishu.fail_next("send", code=230099, http_status=400, msg="Failed to create card content")
    text = "## Done\n\nThe **deploy** went through."
    await feishu_channel(feishu).send(FEISHU_HERE, Reply(text, key="run-8/answer"))
    (said,) = feishu.messages("oc_chat1")
    assert (said.msg_type, said.text) == ("text", text)


async def test_slack_a_markdown_block_slack_refuses_is_said_as_text(slack: FakeSlack) -> None:
    slack.error_next("chat.postMessage", "invalid_blocks")
    text = "## Done\n\nThe **deploy** went through <3"
    await slack_channel(slack).send(SLACK_HERE, Reply(text, key="run-9/answer"))
    (said,) = slack.posts("C111", THREAD)
    assert said.params["text"] == "## Done\n\nThe **deploy** went through &lt;3"
    assert "blocks" not in said.params
    assert said.params["metadata"]["event_payload"] == {"post": "run-9/answer/0"}
