"""Slack payloads to `Inbound`: sessions, mentions, what is ignored, command text."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.commands import parse_command
from adapters.slack.answers import FEEDBACK
from adapters.slack.inbound import (
    APPROVE_ALWAYS,
    APPROVE_ONCE,
    SlackIdentity,
    action_inbound,
    command_inbound,
    feedback_inbound,
    message_inbound,
    modal_inbound,
)
from adapters.slack.payloads import (
    BlockActions,
    MessageEvent,
    ModalContext,
    SlashCommand,
    ViewSubmission,
)
from adapters.slack.text import clean_text, escape, own_text
from adapters.split import split_text
from tests.fake_slack import block_action_payload

ME = SlackIdentity(team_id="T1", bot_user_id="UBOT", bot_id="BBOT")


def event(**fields: str | None) -> MessageEvent:
    base: dict[str, str | None] = {"type": "message", "channel": "C1", "ts": "10.1", "user": "U1"}
    return MessageEvent.model_validate(base | fields)


def test_clean_text_strips_the_bot_mention_and_unescapes() -> None:
    raw = "<@UBOT> run: echo a &gt;&gt; f &amp;&amp; cat &lt;in"
    assert clean_text(raw, "UBOT") == "run: echo a >> f && cat <in"


def test_clawgate_names_people_in_slack_by_mention_not_by_key() -> None:
    said = "Mode: plan, set by slack:U0123ABCD (was auto); <@U9> & feishu:ou_x stay as typed"
    assert own_text(said) == (
        "Mode: plan, set by <@U0123ABCD> (was auto); &lt;@U9&gt; &amp; feishu:ou_x stay as typed"
    )
    assert own_text("xslack:U1 and slack:T1:C1") == "xslack:U1 and slack:T1:C1"  # not people


def test_clean_text_makes_markup_plain() -> None:
    raw = "<@UBOT> ask <@U2|bob> in <#C9|general> about <https://x.io/a|the doc> <!here>"
    assert clean_text(raw, "UBOT") == "ask @U2 in #general about https://x.io/a @here"


def test_escape_and_split() -> None:
    assert escape("a<b>&c") == "a&lt;b&gt;&amp;c"
    pieces = split_text("line\n" * 2000, limit=1000)
    assert all(len(p) <= 1000 for p in pieces)
    assert "".join(p + "\n" for p in pieces).count("line") == 2000


def test_top_level_mention_starts_a_thread_session() -> None:
    inbound = message_inbound(event(type="app_mention", text="<@UBOT> hi"), "Ev1", "T1", ME)
    assert inbound is not None
    assert inbound.session == "slack:T1:C1:10.1"
    assert inbound.conversation.id == "slack:T1:C1"
    assert inbound.conversation.data == {"channel": "C1", "thread_ts": "10.1", "user": "U1"}
    assert inbound.text == "hi"
    assert inbound.actor.key == "slack:U1"
    assert not inbound.needs_session


def test_mention_and_message_events_share_a_dedupe_key() -> None:
    mention = message_inbound(event(type="app_mention", text="<@UBOT> hi"), "Ev1", "T1", ME)
    message = message_inbound(event(text="<@UBOT> hi", channel_type="channel"), "Ev2", "T1", ME)
    assert mention is not None and message is not None
    assert set(mention.dedupe_keys) & set(message.dedupe_keys)
    assert mention.session == message.session


def test_reply_in_thread_without_mention_needs_an_existing_session() -> None:
    inbound = message_inbound(event(text="and then?", thread_ts="9.0"), "Ev1", "T1", ME)
    assert inbound is not None
    assert inbound.needs_session
    assert inbound.session == "slack:T1:C1:9.0"


def test_dm_is_one_session_unless_threaded() -> None:
    top = message_inbound(event(channel="D1", channel_type="im", text="hi"), "Ev1", "T1", ME)
    threaded = message_inbound(
        event(channel="D1", channel_type="im", text="hi", thread_ts="5.0"), "Ev2", "T1", ME
    )
    assert top is not None and threaded is not None
    assert top.session == "slack:T1:D1"
    assert "thread_ts" not in top.conversation.data
    assert threaded.session == "slack:T1:D1:5.0"


def test_a_group_dm_is_a_direct_message_whatever_the_payload() -> None:
    mpim = message_inbound(
        event(channel="G1", channel_type="mpim", text="<@UBOT> hi"), "Ev1", "T1", ME
    )
    private = message_inbound(
        event(channel="G2", channel_type="group", text="<@UBOT> hi"), "Ev2", "T1", ME
    )
    assert mpim is not None and mpim.conversation.direct
    assert private is not None and not private.conversation.direct
    # An app_mention there does not say which it is: its `message` event is taken instead.
    unsure = event(type="app_mention", channel="G1", text="<@UBOT> hi")
    assert message_inbound(unsure, "Ev3", "T1", ME) is None
    command = SlashCommand.model_validate(
        {
            "command": "/clawgate",
            "text": "pending",
            "user_id": "U1",
            "channel_id": "G1",
            "channel_name": "mpdm-alice--bob-1",
            "team_id": "T1",
            "trigger_id": "tr1",
        }
    )
    assert command_inbound(command).conversation.direct


@pytest.mark.parametrize(
    "fields",
    [
        {"text": "just chatting"},  # channel chatter without a mention
        {"text": "<@UBOT> hi", "user": "UBOT"},  # the bot itself
        {"text": "<@UBOT> hi", "bot_id": "B2"},  # another bot
        {"text": "<@UBOT> hi", "subtype": "message_changed"},  # an edit
        {"text": "<@UBOT>  "},  # nothing but the mention
    ],
)
def test_ignored_messages(fields: dict[str, str]) -> None:
    assert message_inbound(event(**fields), "Ev1", "T1", ME) is None


def test_an_edited_mention_is_never_a_new_request() -> None:
    """Slack sends `app_mention` again, with `edited`, for each edit of a mention."""
    edited = MessageEvent.model_validate(
        {"type": "app_mention", "channel": "C1", "ts": "10.1", "user": "U1"}
        | {"text": "<@UBOT> run it", "edited": {"user": "U1", "ts": "12.0"}}
    )
    assert message_inbound(edited, "Ev2", "T1", ME) is None


def test_slash_command_belongs_to_the_channel() -> None:
    command = SlashCommand(
        command="/approve",
        text="abc123 always",
        user_id="U1",
        channel_id="C1",
        team_id="T1",
        trigger_id="tr1",
        response_url="http://127.0.0.1/r",
    )
    inbound = command_inbound(command)
    assert inbound.text == "/approve abc123 always"
    assert inbound.session == "slack:T1:C1"
    assert inbound.reply == {"response_url": "http://127.0.0.1/r"}


def _actions(action_id: str, thread_ts: str | None = "9.0") -> BlockActions:
    return BlockActions.model_validate(
        {
            "type": "block_actions",
            "user": {"id": "U2"},
            "team": {"id": "T1"},
            "channel": {"id": "C1"},
            "container": {"message_ts": "9.5", "thread_ts": thread_ts},
            "actions": [{"action_id": action_id, "value": "abc123"}],
            "trigger_id": "tr2",
        }
    )


def test_buttons_are_approve_commands_in_the_notice_thread() -> None:
    once = action_inbound(_actions(APPROVE_ONCE))
    always = action_inbound(_actions(APPROVE_ALWAYS, thread_ts=None))
    assert once is not None and always is not None
    assert once.text == "/approve abc123"
    assert once.session == "slack:T1:C1:9.0"
    assert always.text == "/approve abc123 always"
    assert always.session == "slack:T1:C1:9.5"  # falls back to the notice's own ts
    assert action_inbound(_actions("someone_elses_button")) is None


def _submitted(callback_id: str, values: dict[str, Any]) -> ViewSubmission:
    context = ModalContext(approval_id="abc123", channel="C1", thread_ts="9.0")
    return ViewSubmission.model_validate(
        {
            "type": "view_submission",
            "user": {"id": "U2"},
            "team": {"id": "T1"},
            "view": {
                "id": "V1",
                "callback_id": callback_id,
                "private_metadata": context.model_dump_json(),
                "state": {"values": values},
            },
        }
    )


def test_reject_modal_submission_carries_the_reason() -> None:
    values = {"reason": {"reason": {"value": "  not   now "}}}
    inbound = modal_inbound(_submitted("clawgate_reject", values))
    assert inbound.text == "/reject abc123 not now"
    assert inbound.session == "slack:T1:C1:9.0"
    assert inbound.actor.key == "slack:U2"


def test_a_slack_connect_approver_s_modal_belongs_to_the_workspace_that_opened_it() -> None:
    """A person from another organisation submits the reject modal in a shared channel: the
    payload's `team` is theirs, `view.app_installed_team_id` this bot's."""
    submitted = _submitted("clawgate_reject", {"reason": {"reason": {"value": "no"}}})
    submitted.team.id = "T_PARTNER"
    assert modal_inbound(submitted).session == "slack:T_PARTNER:C1:9.0"  # nothing else said
    submitted.view.app_installed_team_id = "T1"
    assert modal_inbound(submitted).session == "slack:T1:C1:9.0"


def test_edit_modal_submission_approves_the_edited_arguments() -> None:
    edited = '{\n  "command": "ls build"\n}'
    values = {"arguments": {"arguments": {"value": edited}}}
    inbound = modal_inbound(_submitted("clawgate_edit", values))
    assert inbound.text == f"/approve abc123 edit {edited}"
    assert inbound.approval_id == "abc123"
    assert inbound.session == "slack:T1:C1:9.0"
    command = parse_command(inbound.text)
    assert command is not None and command.edit == edited


def _file(file_id: str, name: str, mimetype: str, **extra: Any) -> dict[str, Any]:
    url = f"https://files.slack.com/files-pri/T1-{file_id}/download/{name}"
    return {"id": file_id, "name": name, "mimetype": mimetype, "size": 12} | (
        {"url_private_download": url} | extra
    )


def test_a_message_carries_its_ts_and_its_files_for_the_worker() -> None:
    files = [
        _file("F1", "build.log", "text/plain"),
        _file("F2", "shot.png", "image/png"),
        _file("F3", "shot.png", "image/png"),  # the same name: a file of its own on disk
        {"id": "F4", "name": "old.txt", "mode": "tombstone"},
        {"id": "F5", "name": "../../x.txt", "file_access": "check_file_info"},
    ]
    raw = {"type": "app_mention", "channel": "C1", "ts": "10.1", "user": "U1"}
    payload = MessageEvent.model_validate(raw | {"text": "<@UBOT> look", "files": files})
    inbound = message_inbound(payload, "Ev1", "T1", ME)
    assert inbound is not None and inbound.message == "10.1"
    names = [(a.key, a.name, a.kind) for a in inbound.attachments]
    assert names == [
        ("F1", "build.log", "file"),
        ("F2", "shot.png", "image"),
        ("F3", "shot-F3.png", "image"),
        ("F4", "old.txt", "file"),
        ("F5", "x.txt", "file"),
    ]
    assert inbound.attachments[0].source == {"url": files[0]["url_private_download"]}
    assert inbound.attachments[0].size == 12
    assert inbound.attachments[3].source == {"mode": "tombstone"}
    assert inbound.attachments[4].source == {"file_access": "check_file_info"}


def test_a_file_shared_without_text_is_a_message_in_a_dm() -> None:
    raw = {"type": "message", "channel": "D1", "ts": "10.2", "user": "U1", "channel_type": "im"}
    shared = raw | {"subtype": "file_share", "files": [_file("F1", "a.log", "text/plain")]}
    inbound = message_inbound(MessageEvent.model_validate(shared), "Ev2", "T1", ME)
    assert inbound is not None and inbound.text == "" and len(inbound.attachments) == 1
    assert message_inbound(MessageEvent.model_validate(raw), "Ev3", "T1", ME) is None


def test_a_feedback_click_is_feedback_on_that_answer_in_its_thread() -> None:
    body = block_action_payload(
        FEEDBACK,
        "good answer/slack:T111:C111:10.1/3",
        user="U_BOB",
        message_ts="10.5",
        thread_ts="10.1",
        action_type="feedback_buttons",
    )
    inbound = feedback_inbound(BlockActions.model_validate(body))
    assert inbound is not None and inbound.kind == "feedback"
    assert inbound.text == "good" and inbound.source == {"answer": "answer/slack:T111:C111:10.1/3"}
    assert inbound.session == "slack:T111:C111:10.1" and inbound.message == "10.5"
    assert inbound.actor.key == "slack:U_BOB" and inbound.reply["response_url"]
    forged = {**body, "actions": [{**body["actions"][0], "value": "great answer/x"}]}
    assert feedback_inbound(BlockActions.model_validate(forged)) is None
    assert action_inbound(BlockActions.model_validate(body)) is None  # approves nothing
