"""A question to the requester (the clarify tool) as a Card JSON 2.0 card: addressed to them,
one callback button per option while it waits, the answer in its place after."""

from __future__ import annotations

from adapters.feishu.cards import Card, approval_card, person
from adapters.feishu.inbound import ANSWER
from runtime.channel import ApprovalNotice

_TEMPLATES = {"pending": "blue", "answered": "green"}


def _plain(text: str) -> Card:
    """The model's words as plain text: no markup, no hidden links or mentions."""
    return {"tag": "div", "text": {"tag": "plain_text", "content": text}}


def question_card(notice: ApprovalNotice) -> Card:
    i = notice.approval_id
    elements: list[Card] = [
        {"tag": "markdown", "content": f"{person(notice.requester)} asks you:"},
        _plain(notice.question),
    ]
    if notice.status == "pending":
        elements += [
            {
                "tag": "button",
                "text": {"tag": "plain_text", "content": option},
                "type": "primary" if n == 1 else "default",
                "behaviors": [
                    {
                        "type": "callback",
                        "value": {"action": ANSWER, "approval_id": i, "option": str(n)},
                    }
                ],
            }
            for n, option in enumerate(notice.options, 1)
        ]
        words = "<your words>" if notice.allow_other else "<number>"
        hint = f"Only {person(notice.requester)} can answer; or reply `/answer {i} {words}`"
        elements.append({"tag": "markdown", "content": hint})
    elif notice.status == "answered":
        by = person(notice.decided_by) if notice.decided_by else "the requester"
        elements += [{"tag": "markdown", "content": f"💬 Answered by {by}:"}]
        elements.append(_plain(notice.answer or ""))
    else:
        shown = {"expired": "⏰ Expired: no answer before it expired", "rejected": "Withdrawn"}
        elements.append({"tag": "markdown", "content": shown.get(notice.status, notice.status)})
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {
            "title": {"tag": "plain_text", "content": f"Question {i}"},
            "template": _TEMPLATES.get(notice.status, "grey"),
        },
        "body": {"elements": elements},
    }


def notice_card(notice: ApprovalNotice, copy: bool = False) -> Card:
    """An approval's card, or a question's (never copied elsewhere)."""
    return question_card(notice) if notice.kind == "question" else approval_card(notice, copy)
