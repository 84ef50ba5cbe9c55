"""Block Kit for a question to the requester (the clarify tool): addressed to them, one
button per option while it waits, the answer in place of the buttons after."""

from __future__ import annotations

from adapters.slack.blocks import SECTION_LIMIT, Block, approval_blocks, fallback_text, person
from adapters.slack.inbound import CLARIFY_ANSWER
from adapters.slack.text import escape
from runtime.approval.notices import said
from runtime.channel import ApprovalNotice
from runtime.redact import one_line

QUESTION_BLOCK = "clawgate_question"
BUTTON_LIMIT = 75  # characters of a button's text
# Of a question or an answer, as mrkdwn (escaped): within a text object's 3,000 characters
# with the mention and the words around it.
WORDS_LIMIT = SECTION_LIMIT - 200


def _fitted(text: str, limit: int = WORDS_LIMIT) -> str:
    """`text` escaped for mrkdwn and cut to `limit` characters, never inside an entity: the
    redacted and escaped (`\\u202e`) text may be several times as long as the model wrote it."""
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    pieces, size = [], 1  # room for the ellipsis
    for piece in map(escape, text):
        size += len(piece)
        if size > limit:
            break
        pieces.append(piece)
    return "".join(pieces) + "…"


def _mrkdwn(text: str) -> Block:
    """`verbatim`: no mention, channel or link Slack would find in plain words by itself."""
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def question_blocks(notice: ApprovalNotice) -> list[Block]:
    i = notice.approval_id
    asked = f":question: {person(notice.requester)} *{_fitted(notice.question)}*"
    blocks: list[Block] = [{"type": "section", "text": _mrkdwn(asked)}]
    if notice.status != "pending":
        blocks.append({"type": "context", "elements": [_mrkdwn(_outcome(notice))]})
        return blocks
    buttons = [
        {
            "type": "button",
            "action_id": f"{CLARIFY_ANSWER}_{n}",  # unique within the block, as Slack wants
            "text": {"type": "plain_text", "text": one_line(option, BUTTON_LIMIT), "emoji": True},
            "value": f"{i}:{n}",
        }
        for n, option in enumerate(notice.options, 1)
    ]
    blocks.append({"type": "actions", "block_id": QUESTION_BLOCK, "elements": buttons})
    words = "<your words>" if notice.allow_other else "<number>"
    hint = f"Only {person(notice.requester)} can answer; or reply `/answer {i} {words}`."
    blocks.append({"type": "context", "elements": [_mrkdwn(hint)]})
    return blocks


def _outcome(notice: ApprovalNotice) -> str:
    if notice.status == "answered":
        by = person(notice.decided_by) if notice.decided_by else "the requester"
        return f":speech_balloon: Answered by {by}: *{_fitted(notice.answer or '')}*"
    if notice.status == "expired":
        return ":alarm_clock: Expired: no answer before it expired"
    if notice.status == "rejected":
        return f":no_entry_sign: Withdrawn ({escape(notice.reason or 'cancelled')})"
    return f"Status: {escape(said(notice.status))}"


def question_text(notice: ApprovalNotice) -> str:
    """The notification text: escaped like the blocks (a `<!here>` in it would alert)."""
    if notice.status == "pending":
        return f"Question: {_fitted(notice.question)}"
    return f"Question ({notice.approval_id}): {said(notice.status)}"


def notice_blocks(notice: ApprovalNotice, copy: bool = False) -> list[Block]:
    """An approval's notice, or a question's (never copied elsewhere)."""
    if notice.kind == "question":
        return question_blocks(notice)
    return approval_blocks(notice, copy)


def notice_text(notice: ApprovalNotice) -> str:
    return question_text(notice) if notice.kind == "question" else fallback_text(notice)
