"""Interactive cards for approval notices: buttons while pending, the outcome afterwards.
`update_multi` lets the card be updated for everyone who sees it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.feishu.inbound import APPROVE_ALWAYS, APPROVE_ONCE, REJECT
from runtime.channel import ApprovalNotice

Card = dict[str, Any]
_TEMPLATES = {"pending": "orange", "approved": "green", "executing": "green", "consumed": "green"}


def person(key: str) -> str:
    """`feishu:ou_1` as a Feishu mention; anyone else by their key."""
    platform, _, user = key.partition(":")
    return f"<at id={user}></at>" if platform == "feishu" else key


def _md(text: str) -> str:
    """Plain text inside lark_md: neutralize the characters that start markup."""
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*").replace("`", "'")


def outcome_line(notice: ApprovalNotice) -> str:
    by = f" by {person(notice.decided_by)}" if notice.decided_by else ""
    reason = f": {_md(notice.reason)}" if notice.reason else ""
    lines = {
        "approved": f"✅ Approved{by}",
        "executing": f"⏳ Approved{by}; running",
        "consumed": f"✅ Approved{by}; it ran",
        "rejected": f"⛔ Rejected{by}{reason}",
        "expired": "⏰ Expired; nothing was executed",
        "outcome_unknown": "⚠️ Outcome unknown"
        + (f" ({_md(notice.outcome)})" if notice.outcome else "")
        + "; it will not be run again",
    }
    return lines.get(notice.status, f"Status: {notice.status}")


def approval_card(notice: ApprovalNotice) -> Card:
    i = notice.approval_id
    expires = datetime.fromtimestamp(notice.expires_at / 1000, tz=UTC).strftime(
        "%Y-%m-%d %H:%M UTC"
    )
    reasons = "\n".join(f"- {_md(r)}" for r in notice.reasons) or "- risky call"
    details = (
        f"**Tool:** {_md(notice.tool)}\n**Arguments:**\n{_md(notice.arguments)}\n"
        f"**Why it needs approval:**\n{reasons}\n"
        f"**Requested by:** {person(notice.requester)}   **Expires:** {expires}\n**ID:** {i}"
    )
    pending = notice.status == "pending"
    elements: list[Card] = [{"tag": "div", "text": {"tag": "lark_md", "content": details}}]
    if pending:
        elements.append(
            {
                "tag": "action",
                "actions": [
                    _button("Approve once", APPROVE_ONCE, i, "primary"),
                    _button("Approve always", APPROVE_ALWAYS, i, "default"),
                    _button("Reject", REJECT, i, "danger"),
                ],
            }
        )
        note = f"or type /approve {i} or /reject {i} <reason>"
    else:
        note = outcome_line(notice)
    elements.append({"tag": "note", "elements": [{"tag": "lark_md", "content": note}]})
    return {
        "config": {"update_multi": True, "wide_screen_mode": True},
        "header": {
            "title": {"tag": "plain_text", "content": "Approval needed" if pending else "Approval"},
            "template": _TEMPLATES.get(notice.status, "red"),
        },
        "elements": elements,
    }


def _button(label: str, action: str, approval_id: str, kind: str) -> Card:
    return {
        "tag": "button",
        "text": {"tag": "plain_text", "content": label},
        "type": kind,
        "value": {"action": action, "approval_id": approval_id},
    }
