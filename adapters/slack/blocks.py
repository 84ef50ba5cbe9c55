"""Block Kit for approval notices (buttons while pending, the outcome after) and the reject
and edit modals."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.slack.inbound import (
    APPROVE_ALWAYS,
    APPROVE_ONCE,
    ARGUMENTS_BLOCK,
    ARGUMENTS_INPUT,
    EDIT,
    EDIT_VIEW,
    REASON_BLOCK,
    REASON_INPUT,
    REJECT,
    REJECT_VIEW,
)
from adapters.slack.payloads import ModalContext
from adapters.slack.text import escape
from runtime.approval.notices import quorum_line, said
from runtime.channel import ApprovalNotice

Block = dict[str, Any]
SECTION_LIMIT = 3_000


def person(key: str) -> str:
    """`slack:U1` as a Slack mention; anyone else (operator, console) by their key."""
    platform, _, user = key.partition(":")
    return f"<@{user}>" if platform == "slack" else escape(key)


def _expiry(notice: ApprovalNotice) -> str:
    seconds = notice.expires_at // 1000
    fallback = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{seconds}^{{date_short_pretty}} {{time}}|{fallback}>"


def _code(text: str) -> str:
    return "```" + escape(text).replace("```", "'''") + "```"


def _origin(conversation_id: str) -> str:
    """`slack:T1:C1` as a channel link; another platform's id as it is."""
    platform, _, rest = conversation_id.partition(":")
    return f"<#{rest.rsplit(':', 1)[-1]}>" if platform == "slack" else escape(conversation_id)


def _details(notice: ApprovalNotice, copy: bool = False) -> str:
    reasons = "\n".join(f"• {escape(reason)}" for reason in notice.reasons) or "• risky call"
    text = (
        f"*Tool:* `{escape(notice.tool)}`\n*Arguments:*\n{_code(notice.arguments)}\n"
        f"*Why it needs approval:*\n{reasons}\n"
        f"*Requested by:* {person(notice.requester)}   *Expires:* {_expiry(notice)}\n"
        f"*ID:* `{notice.approval_id}`"
    )
    quorum = quorum_line(notice, person)
    if quorum:
        text += f"\n*Approvals:* {quorum}"
    text += "".join(f"\n*Note:* {escape(note)}" for note in notice.notes)
    if copy:
        text += f"\n*Asked in:* {_origin(notice.conversation)} (the run continues there)"
    return text[:SECTION_LIMIT]


def outcome_line(notice: ApprovalNotice) -> str:
    by = f" by {person(notice.decided_by)}" if notice.decided_by else ""
    reason = f": {escape(notice.reason)}" if notice.reason else ""
    status = notice.status
    if status == "approved":
        return f":white_check_mark: Approved{by}"
    if status == "executing":
        return f":hourglass_flowing_sand: Approved{by}; running"
    if status == "consumed":
        return f":white_check_mark: Approved{by}; it ran"
    if status == "rejected":
        return f":no_entry: Rejected{by}{reason}"
    if status == "expired":
        return ":alarm_clock: Expired; nothing was executed"
    if status == "outcome_unknown":
        outcome = f" ({escape(notice.outcome)})" if notice.outcome else ""
        return f":warning: Outcome unknown{outcome}; it will not be run again"
    return f"Status: {escape(said(status))}"


def fallback_text(notice: ApprovalNotice) -> str:
    """The notification text (and what screen readers and old clients show)."""
    if notice.items:
        n = len(notice.items)
        if notice.status == "pending":
            return f"Approval needed for {n} calls (batch {notice.batch})"
        return f"Approvals of {n} calls (batch {notice.batch}): decided"
    if notice.status == "pending":
        return f"Approval needed for {notice.tool} ({notice.approval_id})"
    return f"Approval {notice.approval_id} ({notice.tool}): {said(notice.status)}"


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def approval_blocks(notice: ApprovalNotice, copy: bool = False) -> list[Block]:
    """`copy`: posted in another conversation than the one that asked (it names that one)."""
    if notice.items:
        return batch_blocks(notice, copy)
    header = ":lock: *Approval needed*" if notice.status == "pending" else "*Approval*"
    return [_section(header), _section(_details(notice, copy)), *_decision(notice)]


def _decision(notice: ApprovalNotice, block_id: str = "clawgate_approval") -> list[Block]:
    """The buttons of a pending call (and how to type the decision), else its outcome."""
    i = notice.approval_id
    if notice.status != "pending":
        return [_context(outcome_line(notice))]
    buttons = [
        _button("Approve once", APPROVE_ONCE, i, "primary"),
        *([_button(notice.always, APPROVE_ALWAYS, i, None)] if notice.always else []),
        _button("Reject", REJECT, i, "danger"),
    ]
    if notice.editable:
        buttons.insert(-1, _button("Edit and approve…", EDIT, f"{i}\n{notice.editable}", None))
    typed = f"or type `/approve {i}`, `/approve {i} edit <json>` or `/reject {i} <reason>`"
    return [{"type": "actions", "block_id": block_id, "elements": buttons}, _context(typed)]


def batch_blocks(notice: ApprovalNotice, copy: bool = False) -> list[Block]:
    """A batch: each call with its own buttons, then approve all / reject all (each decides
    the calls the clicker may decide). Up to 10 calls: 4 blocks each, within Slack's 50."""
    b, n = notice.batch, len(notice.items)
    pending = notice.status == "pending"
    head = f":lock: *{n} calls need approval*" if pending else f"*Approvals of {n} calls*"
    blocks = [_section(f"{head} (batch `{b}`): they run in the model's order once all are decided")]
    for k, item in enumerate(notice.items, 1):
        blocks += [{"type": "divider"}, _section(f"*{k} of {n}*\n{_details(item, copy)}")]
        blocks += _decision(item, f"clawgate_approval_{item.approval_id}")
    if pending:
        every = [
            _button("Approve all", APPROVE_ONCE, b, "primary"),
            _button("Reject all", REJECT, b, "danger"),
        ]
        blocks += [
            {"type": "divider"},
            {"type": "actions", "block_id": "clawgate_batch", "elements": every},
            _context(f"or type `/approve {b}` or `/reject {b} <reason>`: the calls you may decide"),
        ]
    return blocks


def _button(label: str, action_id: str, value: str, style: str | None) -> Block:
    button: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def _modal(callback_id: str, context: ModalContext, title: str, submit: str, field: Block) -> Block:
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": context.model_dump_json(),
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": submit},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [{"type": "input", **field}],
    }


def reject_modal(context: ModalContext) -> Block:
    field = {
        "block_id": REASON_BLOCK,
        "optional": True,
        "label": {"type": "plain_text", "text": "Why? (told to the assistant)"},
        "element": {
            "type": "plain_text_input",
            "action_id": REASON_INPUT,
            "multiline": True,
            "max_length": 500,
        },
    }
    return _modal(REJECT_VIEW, context, "Reject the call", "Reject", field)


def edit_modal(context: ModalContext, arguments: str) -> Block:
    """The call's arguments, prefilled, to change before approving; judged again on submit."""
    field = {
        "block_id": ARGUMENTS_BLOCK,
        "label": {"type": "plain_text", "text": "Arguments (JSON), as they should run"},
        "hint": {
            "type": "plain_text",
            "text": "The edited call is checked by the policy again before it runs.",
        },
        "element": {
            "type": "plain_text_input",
            "action_id": ARGUMENTS_INPUT,
            "multiline": True,
            "initial_value": arguments,
            "max_length": 3000,
        },
    }
    return _modal(EDIT_VIEW, context, "Edit and approve", "Approve", field)
