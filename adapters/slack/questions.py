"""Block Kit for a question to the requester (the clarify tool): addressed to them, one
button per option while it waits, the answer in place of the buttons after."""

from __future__ import annotations

from adapters.slack.blocks import Block, approval_blocks, fallback_text, person
from adapters.slack.inbound import CLARIFY_ANSWER
from adapters.slack.text import escape
from runtime.channel import ApprovalNotice

QUESTION_BLOCK = "clawgate_question"


def question_blocks(notice: ApprovalNotice) -> list[Block]:
    i = notice.approval_id
    asked = f":question: {person(notice.requester)} *{escape(notice.question)}*"
    blocks: list[Block] = [{"type": "section", "text": {"type": "mrkdwn", "text": asked}}]
    if notice.status != "pending":
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": _outcome(notice)}]}
        )
        return blocks
    buttons = [
        {
            "type": "button",
            "action_id": f"{CLARIFY_ANSWER}_{n}",  # unique within the block, as Slack wants
            "text": {"type": "plain_text", "text": option, "emoji": True},
            "value": f"{i}:{n}",
        }
        for n, option in enumerate(notice.options, 1)
    ]
    blocks.append({"type": "actions", "block_id": QUESTION_BLOCK, "elements": buttons})
    words = "<your words>" if notice.allow_other else "<number>"
    hint = f"Only {person(notice.requester)} can answer; or reply `/answer {i} {words}`."
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": hint}]})
    return blocks


def _outcome(notice: ApprovalNotice) -> str:
    if notice.status == "answered":
        by = person(notice.decided_by) if notice.decided_by else "the requester"
        return f":speech_balloon: Answered by {by}: *{escape(notice.answer or '')}*"
    if notice.status == "expired":
        return ":alarm_clock: Expired: no answer before it expired"
    if notice.status == "rejected":
        return f":no_entry_sign: Withdrawn ({escape(notice.reason or 'cancelled')})"
    return f"Status: {escape(notice.status.replace('_', ' '))}"


def question_text(notice: ApprovalNotice) -> str:
    if notice.status == "pending":
        return f"Question: {notice.question}"
    return f"Question ({notice.approval_id}): {notice.status}"


def notice_blocks(notice: ApprovalNotice, copy: bool = False) -> list[Block]:
    """An approval's notice, or a question's (never copied elsewhere)."""
    if notice.kind == "question":
        return question_blocks(notice)
    return approval_blocks(notice, copy)


def notice_text(notice: ApprovalNotice) -> str:
    return question_text(notice) if notice.kind == "question" else fallback_text(notice)
