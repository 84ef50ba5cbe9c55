"""Approval notices as Card JSON 2.0: buttons (callback behaviours) and the edit form while
pending, the outcome afterwards. JSON 2.0 cards are shared (`update_multi`), so a patch after
the decision updates the card for everyone who sees it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.feishu.inbound import (
    APPROVE_ALWAYS,
    APPROVE_ONCE,
    ARGUMENTS,
    EDIT,
    REJECT,
    edit_button,
)
from runtime.approval.notices import EDITABLE_CHARS, quorum_line, said
from runtime.channel import ApprovalNotice

Card = dict[str, Any]
_TEMPLATES = {"pending": "orange", "approved": "green", "executing": "green", "consumed": "green"}


def person(key: str) -> str:
    """`feishu:ou_1` as a Feishu mention; anyone else by their key."""
    platform, _, user = key.partition(":")
    return f"<at id={user}></at>" if platform == "feishu" else key


REASON_LIMIT = 500  # characters of a rejection reason shown: cards must stay under 30 KB


def _plain(text: str, grey: bool = False) -> Card:
    """Untrusted text (arguments, reasons) as plain text: no markup, no hidden links."""
    text_part: Card = {"tag": "plain_text", "content": text}
    if grey:
        text_part |= {"text_size": "notation", "text_color": "grey"}
    return {"tag": "div", "text": text_part}


def _md(text: str) -> Card:
    return {"tag": "markdown", "content": text}


def outcome(notice: ApprovalNotice) -> list[Card]:
    """The lines of a decided card: who decided (a mention), then any reason as plain text."""
    by = f" by {person(notice.decided_by)}" if notice.decided_by else ""
    heads = {
        "approved": f"✅ Approved{by}",
        "executing": f"⏳ Approved{by}; running",
        "consumed": f"✅ Approved{by}; it ran",
        "rejected": f"⛔ Rejected{by}",
        "expired": "⏰ Expired; nothing was executed",
        "outcome_unknown": "⚠️ Outcome unknown; it will not be run again",
    }
    note = [_md(heads.get(notice.status, f"Status: {said(notice.status)}"))]
    detail = notice.reason if notice.status == "rejected" else notice.outcome
    if detail and notice.status in ("rejected", "outcome_unknown"):
        note.append(_plain(detail[:REASON_LIMIT]))
    return note


def approval_card(notice: ApprovalNotice, copy: bool = False, deciding: str = "") -> Card:
    """`copy`: posted in another chat than the one that asked (it names that one);
    `deciding`: a click that decides it was taken (what it does, by whom), the decision not
    recorded yet: the buttons go, the card says so until it is updated with the outcome."""
    if notice.items:
        return batch_card(notice, copy)
    pending = notice.status == "pending"
    title = "Approval needed" if pending else "Approval"
    return _card(title, notice.status, _elements(notice, copy, deciding))


def batch_card(notice: ApprovalNotice, copy: bool = False) -> Card:
    """A batch: each call with its own buttons, then approve all / reject all (each decides
    the calls the clicker may decide); they run in the model's order once all are decided."""
    b, n = notice.batch, len(notice.items)
    pending = notice.status == "pending"
    elements = [_md(f"**Batch:** {b}: the calls run in the model's order once all are decided")]
    for k, item in enumerate(notice.items, 1):
        elements += [{"tag": "hr"}, _md(f"**{k} of {n}**"), *_elements(item, copy, "")]
    if pending:
        every = [
            _button("Approve all", APPROVE_ONCE, b, "primary"),
            _button("Reject all", REJECT, b, "danger"),
        ]
        hint = f"or type /approve {b} or /reject {b} <reason>: the calls you may decide"
        elements += [{"tag": "hr"}, _buttons(every), _plain(hint, grey=True)]
    title = f"{n} calls need approval" if pending else f"Approvals of {n} calls"
    return _card(title, "pending" if pending else "approved", elements)


def _card(title: str, status: str, elements: list[Card]) -> Card:
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "width_mode": "fill"},
        "header": {
            "title": {"tag": "plain_text", "content": title},
            "template": _TEMPLATES.get(status, "red"),
        },
        "body": {"elements": elements},
    }


def _buttons(buttons: list[Card]) -> Card:
    return {
        "tag": "column_set",
        "flex_mode": "flow",
        "columns": [{"tag": "column", "width": "auto", "elements": [b]} for b in buttons],
    }


def _elements(notice: ApprovalNotice, copy: bool, deciding: str) -> list[Card]:
    """One call: what it is, then its buttons while pending, else its outcome."""
    i = notice.approval_id
    when = datetime.fromtimestamp(notice.expires_at / 1000, tz=UTC)
    reasons = "\n".join(f"- {r}" for r in notice.reasons) or "- risky call"
    pending = notice.status == "pending"
    elements: list[Card] = [
        _md(f"**Tool:** {notice.tool}    **ID:** {i}"),
        _md("**Arguments:**"),
        _plain(notice.arguments),
        _md("**Why it needs approval:**"),
        _plain(reasons),
        _md(
            f"**Requested by:** {person(notice.requester)}    "
            f"**Expires:** {when.strftime('%Y-%m-%d %H:%M UTC')}"
        ),
    ]
    quorum = quorum_line(notice, person)
    if quorum:
        elements.append(_md(f"**Approvals:** {quorum}"))
    elements += [_plain(f"Note: {note}") for note in notice.notes]
    if copy:
        elements.append(_md(f"**Asked in:** {notice.conversation} (the run continues there)"))
    elements.append({"tag": "hr"})
    if pending and deciding:
        elements.append(_md(f"⏳ {deciding}…"))
    elif pending:
        always = [_button(notice.always, APPROVE_ALWAYS, i, "default")] if notice.always else []
        buttons = [_button("Approve once", APPROVE_ONCE, i, "primary"), *always]
        buttons.append(_button("Reject", REJECT, i, "danger"))
        elements.append(_buttons(buttons))
        if notice.editable:
            elements.append(_edit_form(notice))
        hint = f"or type /approve {i}, /approve {i} edit <json> or /reject {i} <reason>"
        elements.append(_plain(hint, grey=True))
    else:
        elements += outcome(notice)
    return elements


def _button(label: str, action: str, approval_id: str, kind: str) -> Card:
    """A button whose click calls back (`card.action.trigger`) with the decision."""
    return {
        "tag": "button",
        "text": {"tag": "plain_text", "content": label},
        "type": kind,
        "behaviors": [
            {"type": "callback", "value": {"action": action, "approval_id": approval_id}}
        ],
    }


def _edit_form(notice: ApprovalNotice) -> Card:
    """The arguments prefilled in a form: submitted, the callback carries the input in
    `action.form_value` and it is `/approve <id> edit <json>` (the edited call is judged again
    before it runs)."""
    submit = _button("Edit and approve", EDIT, notice.approval_id, "default")
    return {
        "tag": "form",
        "name": f"clawgate_form_{notice.approval_id}",  # unique in a batch's card
        "elements": [
            {
                "tag": "input",
                "name": ARGUMENTS,
                "input_type": "multiline_text",
                "rows": 4,
                "max_length": EDITABLE_CHARS,
                "default_value": notice.editable,
                "label": {
                    "tag": "plain_text",
                    "content": "Or change the arguments (JSON) and approve:",
                },
            },
            submit | {"form_action_type": "submit", "name": edit_button(notice.approval_id)},
        ],
    }
