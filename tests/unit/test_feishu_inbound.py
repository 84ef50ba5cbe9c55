"""Feishu events to `Inbound` (adapters/feishu/inbound.py) and approval cards (cards.py), on
the typed objects lark-oapi itself builds from the JSON Feishu sends."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import lark_oapi as lark
import pytest
from lark_oapi.api.im.v1 import P2ImMessageReceiveV1
from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTrigger

from adapters.feishu.app import FeishuAdapter
from adapters.feishu.cards import approval_card, outcome, person
from adapters.feishu.channel import FeishuChannel, feishu_client, named, plain
from adapters.feishu.content import Content, read_content
from adapters.feishu.inbound import (
    APPROVE_ALWAYS,
    APPROVE_ONCE,
    ARGUMENTS,
    EDIT,
    REJECT,
    CardClick,
    FeishuIdentity,
    card_click,
    clean_text,
    edit_button,
    message_inbound,
)
from adapters.feishu.resources import sniff
from runtime.channel import ApprovalNotice
from tests.fake_feishu import (
    BOT_OPEN_ID,
    TENANT_KEY,
    card_action_event,
    event_envelope,
    message_event,
)

ME = FeishuIdentity(BOT_OPEN_ID)
BOT = ("@_user_1", BOT_OPEN_ID, "clawgate")
CHAT = "oc_chat1"


def typed_message(event: dict[str, Any], event_id: str = "ev1") -> Any:
    envelope = event_envelope("im.message.receive_v1", event, token="t", event_id=event_id)
    return lark.JSON.unmarshal(json.dumps(envelope), P2ImMessageReceiveV1)


def typed_click(value: Any, **kwargs: Any) -> Any:
    event = card_action_event({}, open_message_id="om_card", **kwargs)
    event["action"]["value"] = value
    envelope = event_envelope("card.action.trigger", event, token="t", event_id="ev_click")
    return lark.JSON.unmarshal(json.dumps(envelope), P2CardActionTrigger)


class Mention:
    def __init__(self, key: str, open_id: str, name: str) -> None:
        self.key, self.name = key, name
        self.id = type("Id", (), {"open_id": open_id})()


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------


def words(message_type: str, content: Any) -> str | None:
    read = read_content(message_type, content if isinstance(content, str) else json.dumps(content))
    return None if read is None else read.text


def test_text_and_post_messages_keep_every_word() -> None:
    assert words("text", {"text": "run: ls"}) == "run: ls"
    post = {
        "zh_cn": {
            "title": "Build broke",
            "content": [
                [
                    {"tag": "at", "user_id": "@_user_1", "user_name": "clawgate"},
                    {"tag": "text", "text": "/approve ab12cd", "style": ["bold"]},
                ],
                [
                    {"tag": "a", "text": "log", "href": "https://ci/1"},
                    {"tag": "emotion", "emoji_type": "SMILE"},
                ],
                [{"tag": "code_block", "language": "PYTHON", "text": "def f():\n    return 1\n"}],
                [{"tag": "hr"}],
                [{"tag": "md", "text": "**bold** and `code`"}],
                [{"tag": "img", "image_key": "img_1"}],
            ],
        }
    }
    read = read_content("post", json.dumps(post))
    assert read is not None
    lines = read.text.split("\n")
    assert lines[0] == "Build broke"  # the title, then the paragraphs
    assert lines[1].split() == ["@_user_1", "/approve", "ab12cd"]
    assert lines[2] == "log (https://ci/1):smile:"
    assert lines[3:7] == ["```python", "def f():", "    return 1", "```"]
    assert lines[7:] == ["---", "**bold** and `code`"]  # the image is an attachment
    assert [(a.key, a.kind) for a in read.attachments] == [("img_1", "image")]
    # The mention is a key, as in text messages, so the bot's own is stripped like there.
    mention = SimpleNamespace(key="@_user_1", id=SimpleNamespace(open_id=BOT_OPEN_ID), name="c")
    assert clean_text(lines[1], [mention], BOT_OPEN_ID) == ("/approve ab12cd", True)
    flat = {"title": "", "content": [[{"tag": "text", "text": "hello"}]]}
    assert words("post", flat) == "hello"
    assert words("text", "not json") is None
    assert words("text", ["a"]) is None
    assert words("text", {"text": 3}) is None


def test_images_files_and_kinds_not_read() -> None:
    image = read_content("image", json.dumps({"image_key": "img_1"}))
    assert image is not None and image.text == "" and image.unread is None
    assert [(a.key, a.kind, a.source) for a in image.attachments] == [
        ("img_1", "image", {"type": "image"})
    ]
    file = read_content("file", json.dumps({"file_key": "file_1", "file_name": "build.log"}))
    assert file is not None
    assert [(a.name, a.mimetype, a.source) for a in file.attachments] == [
        ("build.log", "application/octet-stream", {"type": "file"})  # typed once downloaded
    ]
    notes = read_content("file", json.dumps({"file_key": "file_2", "file_name": "notes.txt"}))
    assert notes is not None and notes.attachments[0].mimetype == "text/plain"
    video = read_content("media", json.dumps({"file_key": "file_3", "image_key": "img_c"}))
    assert video is not None and video.attachments[0].kind == "media"
    for kind, said in [("sticker", "a sticker"), ("audio", "a voice message"), ("vote", "a poll")]:
        assert read_content(kind, json.dumps({"file_key": "x"})) == Content("", unread=said)
    assert read_content("brand_new", "{}") == Content("", unread="a message of type brand_new")


def test_clean_text_strips_the_bot_and_names_others() -> None:
    mentions = [Mention("@_user_1", BOT_OPEN_ID, "clawgate"), Mention("@_user_2", "ou_b", "Bob")]
    text, mentioned = clean_text("@_user_1  ask @_user_2 about @_user_9  it", mentions, BOT_OPEN_ID)
    assert (text, mentioned) == ("ask @Bob about it", True)
    assert clean_text("@_user_2 hi", mentions[1:], BOT_OPEN_ID) == ("@Bob hi", False)
    # Shell text survives: Feishu does not escape > or & like Slack does.
    assert clean_text("@_user_1 run: echo a >> f && ls", mentions, BOT_OPEN_ID) == (
        "run: echo a >> f && ls",
        True,
    )


# ---------------------------------------------------------------------------------------------
# Message events
# ---------------------------------------------------------------------------------------------


def test_p2p_message_is_one_session_per_chat_answered_without_thread() -> None:
    data = typed_message(message_event("read notes.txt", chat_type="p2p", chat_id="oc_dm"))
    inbound = message_inbound(data, ME)
    assert inbound is not None
    message_id = data.event.message.message_id
    assert inbound.session == f"feishu:{TENANT_KEY}:oc_dm"
    assert inbound.conversation.id == f"feishu:{TENANT_KEY}:oc_dm"
    assert inbound.conversation.data == {"chat_id": "oc_dm", "message_id": message_id}
    assert inbound.text == "read notes.txt" and inbound.actor.key == "feishu:ou_alice"
    assert inbound.dedupe_keys == ("feishu:event:ev1", f"feishu:message:{message_id}")
    assert inbound.reply == {"message_id": message_id} and not inbound.needs_session
    assert inbound.approval_id is None

    # A quote-reply in a direct chat (it sets root_id) stays in the chat's one session.
    quoted = typed_message(message_event("hi", chat_type="p2p", chat_id="oc_dm", root_id="om_r"))
    inbound = message_inbound(quoted, ME)
    assert inbound is not None and inbound.session == f"feishu:{TENANT_KEY}:oc_dm"
    assert "thread" not in inbound.conversation.data


def test_group_mention_starts_a_thread_session_and_commands_name_their_approval() -> None:
    data = typed_message(message_event("@_user_1 /approve ab12cd", mentions=[BOT]))
    inbound = message_inbound(data, ME)
    assert inbound is not None
    message_id = data.event.message.message_id
    assert inbound.session == f"feishu:{TENANT_KEY}:{CHAT}:{message_id}"
    assert inbound.conversation.data == {"chat_id": CHAT, "message_id": message_id, "thread": "1"}
    assert inbound.text == "/approve ab12cd" and inbound.approval_id == "ab12cd"

    in_thread = typed_message(message_event("@_user_1 read a", mentions=[BOT], root_id="om_root"))
    inbound = message_inbound(in_thread, ME)
    assert inbound is not None and inbound.session.endswith(":om_root")
    assert not inbound.needs_session


def test_group_messages_without_mention() -> None:
    assert message_inbound(typed_message(message_event("read notes.txt")), ME) is None
    follow_up = message_inbound(typed_message(message_event("read b", root_id="om_root")), ME)
    assert follow_up is not None and follow_up.needs_session  # only if the bot is in the thread
    assert follow_up.session == f"feishu:{TENANT_KEY}:{CHAT}:om_root"


@pytest.mark.parametrize(
    "event",
    [
        message_event("@_user_1 hi", mentions=[BOT], sender_type="app"),
        message_event("@_user_1 hi", mentions=[BOT], sender_open_id=BOT_OPEN_ID),
        message_event("@_user_1", mentions=[BOT]),  # nothing but the mention
        message_event("@_user_1   ", mentions=[BOT], chat_type="p2p"),
    ],
)
def test_ignored_messages(event: dict[str, Any]) -> None:
    assert message_inbound(typed_message(event), ME) is None


def test_images_files_and_unread_kinds_are_queued_for_the_reader() -> None:
    event = message_event("x", chat_type="p2p", thread_id="omt_1", parent_id="om_p")
    event["message"]["message_type"] = "image"
    event["message"]["content"] = json.dumps({"image_key": "img_1"})
    inbound = message_inbound(typed_message(event), ME)
    assert inbound is not None and inbound.text == ""
    assert inbound.message == event["message"]["message_id"]
    assert [a.key for a in inbound.attachments] == ["img_1"]
    assert inbound.source == {
        "type": "image",
        "parent_id": "om_p",
        "thread_id": "omt_1",
        "create_time": event["message"]["create_time"],
    }
    event["message"]["message_type"] = "sticker"
    event["message"]["content"] = json.dumps({"file_key": "sticker_1"})
    sticker = message_inbound(typed_message(event), ME)
    assert sticker is not None and sticker.attachments == ()
    assert sticker.source["unread"] == "a sticker"
    # In a group a sticker is queued only in a thread (the bot's, the worker checks).
    group = message_event("x")
    group["message"]["message_type"] = "sticker"
    assert message_inbound(typed_message(group), ME) is None


# ---------------------------------------------------------------------------------------------
# Card clicks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "text"),
    [
        (APPROVE_ONCE, "/approve ab12"),
        (APPROVE_ALWAYS, "/approve ab12 always"),
        (REJECT, "/reject ab12"),
    ],
)
def test_card_click(action: str, text: str) -> None:
    click = card_click(typed_click({"action": action, "approval_id": "ab12"}))
    assert isinstance(click, CardClick)
    assert (click.approval_id, click.action, click.text) == ("ab12", action, text)
    assert click.actor.key == "feishu:ou_alice"
    assert click.conversation.id == f"feishu:{TENANT_KEY}:{CHAT}"
    inbound = click.inbound("feishu:s")
    assert inbound.session == "feishu:s" and inbound.approval_id == "ab12"
    assert inbound.dedupe_keys == ("feishu:event:ev_click",)
    assert inbound.reply == {"message_id": "om_card"}


def test_edit_form_submitted_approves_the_edited_arguments() -> None:
    value = {"action": EDIT, "approval_id": "ab12"}
    edited = '{\n "command": "ls"\n}'
    click = card_click(typed_click(value, form_value={ARGUMENTS: edited}))
    assert isinstance(click, CardClick) and click.text == f"/approve ab12 edit {edited}"
    assert card_click(typed_click(value)) is None  # an edit without its form: not ours
    # A submit that carries only the button's name (no callback value): the same edit.
    named = typed_click({}, form_value={ARGUMENTS: edited}, name=edit_button("ab12"))
    by_name = card_click(named)
    assert isinstance(by_name, CardClick) and by_name.text == f"/approve ab12 edit {edited}"


@pytest.mark.parametrize(
    "value",
    [
        {"action": "vote", "approval_id": "ab12"},
        {"action": APPROVE_ONCE},
        {"action": APPROVE_ONCE, "approval_id": 7},
        None,
    ],
)
def test_other_clicks_are_not_ours(value: Any) -> None:
    assert card_click(typed_click(value)) is None


def test_a_click_that_does_not_say_who_clicked_is_told_how_to_decide() -> None:
    """An operator with no open_id (an app not allowed to read it, a person from another
    tenant): a refusal to toast, naming the typed commands, never a decision by nobody."""
    data = typed_click({"action": APPROVE_ONCE, "approval_id": "ab12"})
    data.event.operator.open_id = None
    refusal = card_click(data)
    assert isinstance(refusal, str)
    assert "who clicked" in refusal and "/approve ab12" in refusal and "/reject ab12" in refusal
    data = typed_click({"action": REJECT, "approval_id": "ab12"})
    data.event.context.open_message_id = None
    assert "which card" in str(card_click(data))
    question = typed_click({"action": "answer", "approval_id": "ab12", "option": "2"})
    question.event.operator.open_id = None
    assert "type /answer ab12 <number> in the chat" in str(card_click(question))


# ---------------------------------------------------------------------------------------------
# Cards
# ---------------------------------------------------------------------------------------------


def notice(**changes: Any) -> ApprovalNotice:
    values: dict[str, Any] = {
        "approval_id": "ab12cd",
        "tool": "bash",
        "arguments": "rm -f `x` <at id=all></at> *bold*",
        "reasons": ("rm deletes files",),
        "requester": "feishu:ou_alice",
        "expires_at": 1_700_000_000_000,
        "status": "pending",
        **changes,
    }
    return ApprovalNotice(**values)


def buttons(card: dict[str, Any]) -> list[dict[str, Any]]:
    """The buttons of a JSON 2.0 card, the form's too, in order."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("tag") == "button":
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card)
    return found


def test_pending_card_is_json_2_with_three_callback_buttons_and_is_shared() -> None:
    card = approval_card(notice())
    assert card["schema"] == "2.0" and card["config"]["update_multi"] is True
    elements = card["body"]["elements"]
    assert [b["behaviors"] for b in buttons(card)] == [
        [{"type": "callback", "value": {"action": a, "approval_id": "ab12cd"}}]
        for a in (APPROVE_ONCE, APPROVE_ALWAYS, REJECT)
    ]
    markdown = " ".join(e["content"] for e in elements if e["tag"] == "markdown")
    plain = [e["text"] for e in elements if e["tag"] == "div"]
    assert "<at id=ou_alice></at>" in markdown and "2023-11-14 22:13 UTC" in markdown
    # The arguments are plain text: they cannot mention everyone, link or start markup.
    assert "<at id=all>" not in markdown and "bold" not in markdown
    assert {"tag": "plain_text", "content": "rm -f `x` <at id=all></at> *bold*"} in plain
    assert "/approve ab12cd" in json.dumps(card)
    assert len(json.dumps(card).encode()) < 30 * 1024


def test_the_edit_form_is_offered_only_with_arguments_safe_to_show_whole() -> None:
    arguments = '{\n  "command": "rm -f x"\n}'
    card = approval_card(notice(editable=arguments))
    (form,) = [e for e in card["body"]["elements"] if e["tag"] == "form"]
    field, submit = form["elements"]
    assert (field["tag"], field["name"], field["default_value"]) == ("input", ARGUMENTS, arguments)
    assert (submit["form_action_type"], submit["name"]) == ("submit", edit_button("ab12cd"))
    assert submit["behaviors"] == [
        {"type": "callback", "value": {"action": EDIT, "approval_id": "ab12cd"}}
    ]
    assert [e for e in approval_card(notice())["body"]["elements"] if e["tag"] == "form"] == []


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        ({"status": "consumed", "decided_by": "feishu:ou_admin"}, "Approved by <at id=ou_admin>"),
        ({"status": "executing", "decided_by": "slack:U1"}, "Approved by slack:U1; running"),
        ({"status": "rejected", "decided_by": "feishu:ou_c", "reason": "<b>no</b>"}, "<b>no</b>"),
        ({"status": "expired"}, "Expired; nothing was executed"),
        ({"status": "outcome_unknown", "outcome": "worker lost"}, "worker lost"),
    ],
)
def test_decided_cards_show_the_outcome_without_buttons(changes: dict[str, Any], line: str) -> None:
    decided = notice(**changes)
    card = approval_card(decided)
    elements = card["body"]["elements"]
    assert buttons(card) == [] and card["config"]["update_multi"] is True
    note = outcome(decided)
    assert elements[-len(note) :] == note
    assert any(line in json.dumps(e, ensure_ascii=False) for e in note)
    reasons = [e["text"]["content"] for e in note if e["tag"] == "div"]
    assert all(r in (decided.reason, decided.outcome) for r in reasons)


def test_person() -> None:
    assert person("feishu:ou_1") == "<at id=ou_1></at>"
    assert person("operator:root") == "operator:root"


def test_text_keeps_its_lines_and_code_its_indentation() -> None:
    text = "@_user_1   see:\n```py\ndef f():\n    return  1\n```\n  after   it "
    mentions = [Mention("@_user_1", BOT_OPEN_ID, "clawgate")]
    assert clean_text(text, mentions, BOT_OPEN_ID) == (
        "see:\n```py\ndef f():\n    return  1\n```\nafter it",
        True,
    )


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00", "image/png"),
        (b"\xff\xd8\xff\xe0", "image/jpeg"),
        (b"GIF89a", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"%PDF-1.7", "application/pdf"),
        (b"2026-12-03 build failed\n", "text/plain"),
        ("région".encode()[:2], "text/plain"),  # a character cut where the read stopped
        (b"PK\x03\x04\x00\x00", "application/octet-stream"),
        (b"\xff\xfe\xfa\xfb plain?", "application/octet-stream"),
    ],
)
def test_a_download_is_typed_by_its_first_bytes(head: bytes, kind: str) -> None:
    assert sniff(head) == kind


@pytest.mark.parametrize(
    ("action", "changes", "answered"),
    [
        (APPROVE_ONCE, {}, "⏳ Approving by <at id=ou_admin></at>…"),
        (REJECT, {"quorum": 2}, "⏳ Rejecting by <at id=ou_admin></at>…"),
        (APPROVE_ONCE, {"quorum": 2, "approved_by": ("feishu:ou_b",)}, "⏳ Approving by"),
        (APPROVE_ONCE, {"quorum": 2}, None),  # one more approver needed: the buttons stay
        (EDIT, {}, None),  # judged again, maybe refused: the buttons stay
        (APPROVE_ONCE, {"status": "approved"}, None),
    ],
)
async def test_a_click_that_decides_is_answered_with_the_card_without_buttons(
    action: str, changes: dict[str, Any], answered: str | None
) -> None:
    async def shown(approval_id: str) -> ApprovalNotice:
        return notice(conversation=f"feishu:{TENANT_KEY}:{CHAT}", **changes)

    async def unused(*_: Any) -> Any:
        raise AssertionError("not called")

    client = feishu_client("cli_x", "secret", "http://127.0.0.1:9")
    channel = FeishuChannel(client, "cli_x")
    adapter = FeishuAdapter(FeishuIdentity("ou_bot"), unused, unused, "k", "t", channel, shown)
    value = {"action": action, "approval_id": "ab12cd"}
    click = card_click(
        typed_click(value, operator_open_id="ou_admin", form_value={ARGUMENTS: "{}"})
    )
    assert isinstance(click, CardClick)
    card = await adapter._deciding(click, "Rejecting" if action == REJECT else "Approving")
    if answered is None:
        assert card is None
    else:
        assert (
            card is not None
            and buttons(card) == []
            and answered in json.dumps(card, ensure_ascii=False)
        )
        assert "Asked in" not in json.dumps(card)  # the card of the chat that asked


def test_clawgate_names_people_in_feishu_by_mention_not_by_key() -> None:
    said = "Mode: plan, set by feishu:ou_ab12 (was auto); slack:U1 and feishu:t:oc_1 stay"
    assert named(said) == (
        'Mode: plan, set by <at user_id="ou_ab12"></at> (was auto); slack:U1 and feishu:t:oc_1 stay'
    )


@pytest.mark.parametrize(
    "quoted", ['<at user_id="all"></at>', "< AT user_id=ou_x>", "</at><at id=all>"]
)
def test_no_text_message_mentions_anyone_by_what_it_quotes(quoted: str) -> None:
    """A call's arguments or a question quoted in `/pending` (the model wrote them): their
    `<at>` tags are shown, not obeyed."""
    for shown in (plain(f"k3x: bash: echo {quoted}"), named(f"note {quoted}")):
        assert "<at" not in shown.lower() and "</at" not in shown.lower()
        assert quoted.replace("<", "") in shown.replace("<\u200b", "")
