"""How a question to the asker looks in Slack, Feishu and the terminal, pending and after."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import lark_oapi as lark
import pytest
from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTrigger

from adapters.console.channel import render_request, render_update
from adapters.feishu.inbound import CardClick, card_click
from adapters.feishu.questions import notice_card
from adapters.slack.inbound import action_inbound
from adapters.slack.payloads import BlockActions
from adapters.slack.questions import notice_blocks, notice_text
from runtime.channel import ApprovalNotice, shown_notice
from tests.fake_feishu import card_action_event, event_envelope

ASKED = ApprovalNotice(
    approval_id="k3x9q2m7vd4pw",
    tool="clarify",
    arguments="{}",
    reasons=(),
    requester="slack:U1",
    expires_at=1_800_000_000_000,
    status="pending",
    kind="question",
    question="Which environment?",
    options=("staging", "prod"),
    allow_other=True,
)


def test_pending_shows_one_button_per_option_addressed_to_the_asker() -> None:
    blocks = notice_blocks(ASKED)
    buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert [(b["action_id"], b["value"]) for b in buttons] == [
        ("clarify_answer_1", "k3x9q2m7vd4pw:1"),
        ("clarify_answer_2", "k3x9q2m7vd4pw:2"),
    ]
    text = json.dumps(blocks)
    assert "<@U1> *Which environment?*" in text and "/answer k3x9q2m7vd4pw <your words>" in text
    assert notice_text(ASKED) == "Question: Which environment?"
    card = notice_card(replace(ASKED, requester="feishu:ou_1"))
    assert card["schema"] == "2.0"
    values = [e["behaviors"][0]["value"] for e in card["body"]["elements"] if e["tag"] == "button"]
    assert values == [
        {"action": "answer", "approval_id": "k3x9q2m7vd4pw", "option": str(n)} for n in (1, 2)
    ]
    assert "  1. staging\n  2. prod\n  answer with a number (1-2), or your own words" in (
        render_request(ASKED)
    )


@pytest.mark.parametrize(
    ("status", "slack", "feishu"),
    [
        ("answered", "Answered by <@U1>: *prod*", "Answered by slack:U1:"),
        ("expired", "no answer before it expired", "no answer before it expired"),
        ("rejected", "Withdrawn", "Withdrawn"),
    ],
)
def test_after_the_buttons_give_way_to_what_happened(status: str, slack: str, feishu: str) -> None:
    done = replace(ASKED, status=status, decided_by="slack:U1", answer="prod")
    blocks = notice_blocks(done)
    assert not [b for b in blocks if b["type"] == "actions"]
    assert slack in json.dumps(blocks)
    card = json.dumps(notice_card(done), ensure_ascii=False)
    assert '"button"' not in card
    assert feishu in card
    assert render_update(done).startswith(f"[question k3x9q2m7vd4pw {status}")


def _texts(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every text object of the blocks."""
    found = [b["text"] for b in blocks if "text" in b]
    for block in blocks:
        for element in block.get("elements", ()):
            found.append(element["text"] if element.get("type") == "button" else element)
    return found


def test_the_models_words_neither_alert_nor_overflow_slacks_limits() -> None:
    """A question, options and answer as long as allowed, made longer still by redaction and
    escaping: every text within Slack's limits (a refused block posts nothing), no mention or
    link but the requester's, and the notification text escaped as well."""
    hostile = "<!here> <@U999> <https://evil.example|docs> & "
    asked = shown_notice(
        replace(
            ASKED,
            question=hostile + "\u202e" * 450,
            options=("\u202e" * 75, "password=" + "x" * 66, "plain"),
        )
    )
    answered = shown_notice(
        replace(ASKED, status="answered", decided_by="slack:U1", answer=hostile + "&" * 1950)
    )
    for notice in (asked, answered):
        texts = _texts(notice_blocks(notice))
        for text in texts:
            assert 0 < len(text["text"]) <= 3000
            assert "<!" not in text["text"] and "<@U999>" not in text["text"]
            assert "<http" not in text["text"]
            assert text["type"] == "plain_text" or text.get("verbatim") is True
        assert "<" not in notice_text(notice) and ">" not in notice_text(notice)
    (question, *_) = _texts(notice_blocks(asked))
    assert question["text"].startswith(":question: <@U1> *&lt;!here&gt; &lt;@U999&gt; &lt;https")
    assert notice_text(asked).startswith("Question: &lt;!here&gt;")
    buttons = [e for b in notice_blocks(asked) if b["type"] == "actions" for e in b["elements"]]
    assert [len(b["text"]["text"]) <= 75 for b in buttons] == [True, True, True]
    assert buttons[1]["text"]["text"] == "password=[redacted]"
    assert buttons[2]["text"]["text"] == "plain"


def test_the_models_words_are_plain_text_on_a_feishu_card_well_under_30_kb() -> None:
    hostile = "<at id=all></at> [docs](https://evil.example) **bold** "
    asked = shown_notice(
        replace(
            ASKED,
            requester="feishu:ou_1",
            question=hostile + "\u202e" * 440,
            options=tuple(f"<at id=all></at>{n}" + "\u202e" * 60 for n in range(6)),
        )
    )
    answered = replace(asked, status="answered", decided_by="feishu:ou_1", answer="界" * 2000)
    for notice in (asked, answered):
        card = notice_card(notice)
        assert len(json.dumps(card, ensure_ascii=False).encode()) < 30 * 1024
        marked = [
            e["content"] for e in card["body"]["elements"] if e["tag"] in ("markdown", "lark_md")
        ]
        assert all("id=all" not in text and "evil" not in text for text in marked)
        assert "<at id=ou_1></at>" in marked[0]
        words = [e["text"] for e in card["body"]["elements"] if "text" in e]
        assert {w["tag"] for w in words} == {"plain_text"}


def _slack_click(action_id: str, value: str) -> BlockActions:
    return BlockActions.model_validate(
        {
            "type": "block_actions",
            "user": {"id": "U2"},
            "team": {"id": "T1"},
            "channel": {"id": "C1"},
            "container": {"message_ts": "9.5", "thread_ts": "9.0"},
            "actions": [{"action_id": action_id, "value": value}],
            "trigger_id": "tr2",
        }
    )


def _feishu_click(value: dict[str, Any]) -> Any:
    event = card_action_event(value, open_message_id="om_card")
    envelope = event_envelope("card.action.trigger", event, token="t", event_id="ev_click")
    return lark.JSON.unmarshal(json.dumps(envelope), P2CardActionTrigger)


@pytest.mark.parametrize("option", ["2", "²", "\u0661", "9" * 5000, "", "x", "-1"])
def test_a_clicked_option_is_an_option_number_or_nothing(option: str) -> None:
    """A forged button value never reaches `/answer` as anything but a plain option number
    (`str.isdigit` holds for "²", which `int` refuses)."""
    ours = option == "2"
    slack = action_inbound(_slack_click("clarify_answer_2", f"k3x9q2m7vd4pw:{option}"))
    assert (slack.text if slack else None) == ("/answer k3x9q2m7vd4pw 2" if ours else None)
    value = {"action": "answer", "approval_id": "k3x9q2m7vd4pw", "option": option}
    feishu = card_click(_feishu_click(value))
    assert (feishu.text if isinstance(feishu, CardClick) else None) == (
        "/answer k3x9q2m7vd4pw 2" if ours else None
    )
