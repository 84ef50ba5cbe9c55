"""What people are told about approvals: the notice of a record, why a decision was refused,
and the tool results the lifecycle writes for calls that did not (or will not) run."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from runtime.approval.always import LABELS
from runtime.approval.changes import Changed
from runtime.approval.models import AlwaysCover, ApprovalRecord, ApprovalStatus, Checkpoint
from runtime.approval.store import ApprovalStore, Transition
from runtime.canonical import canonical_json
from runtime.channel import ApprovalNotice, shown_notice
from runtime.models import (
    ConversationRef,
    Message,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolStatus,
)
from runtime.redact import argument_summary, redact, redact_text

# `noun`: "approval", or "question" for a question to the requester.
TRANSITION_MESSAGES = {
    "not_found": "{noun} {id} was not found",
    "expired": "{noun} {id} has expired; nothing was executed",
    "wrong_conversation": "{noun} {id} can only be decided in the conversation that requested it",
    "hash_mismatch": "{noun} {id} failed its integrity check (the stored call changed); refused",
}
# Why a decision attempt was refused, as the audit trail names it.
# The most of the arguments an edit form is prefilled with: they travel in the notice itself
# (a Slack button's value holds 2,000 characters, a Feishu input 1,000). Longer ones are
# edited by typing.
EDITABLE_CHARS = 1_000
REFUSAL_KINDS = {
    "not_found": "unknown_id",
    "already": "already_decided",
    "wrong_status": "already_decided",
}


def editable(arguments: object) -> str:
    """The arguments as an edit form is prefilled with: indented JSON, whole. "" when a part
    of them would be masked (a secret stays out of buttons and forms, which the whole channel
    can read through the API) or they are too long: `/approve <id> edit <json>` still works."""
    if not isinstance(arguments, dict) or redact(arguments) != arguments:
        return ""
    text = json.dumps(arguments, indent=2, ensure_ascii=False)
    return text if len(text) <= EDITABLE_CHARS else ""


def notes_of(record: ApprovalRecord) -> tuple[str, ...]:
    """What the approver should know besides the call: why no "approve always" is offered,
    and the files the agent changed unasked since the session's last approval."""
    notes = []
    if record.always is AlwaysCover.NEVER:
        notes.append(f'no "approve always": {record.no_always or "approve it once"}')
    changed = Changed(tuple(record.unapproved_changes), record.unapproved_more).line()
    if changed:
        notes.append(changed)
    if record.runs_with:
        notes.append(f"once approved it {record.runs_with}")
    return tuple(notes)  # redacted and escaped with the rest (shown_notice)


def notice_of(record: ApprovalRecord, batch: str = "") -> ApprovalNotice:
    """The record as a chat shows it: arguments redacted and cut, hidden characters escaped.
    `batch`: the id of the batch it belongs to."""
    return shown_notice(replace(_notice(record), batch=batch))


def batch_notice(records: Sequence[ApprovalRecord], batch: str) -> ApprovalNotice:
    """The one notice of a batch: its lead's, holding every item's (in the model's order);
    pending while any item is."""
    items = tuple(notice_of(r, batch) for r in records)
    pending = any(i.status == ApprovalStatus.PENDING for i in items)
    status = ApprovalStatus.PENDING.value if pending else "decided"
    return replace(items[0], items=items, status=status)


def _notice(record: ApprovalRecord) -> ApprovalNotice:
    try:
        arguments = json.loads(record.arguments)
        form = editable(arguments)
    except json.JSONDecodeError:
        arguments, form = {"arguments": record.arguments}, ""
    return ApprovalNotice(
        approval_id=record.id,
        tool=record.tool,
        arguments=argument_summary(
            arguments if isinstance(arguments, dict) else {"value": arguments}
        ),
        reasons=tuple(record.reasons),
        requester=record.requester.name or record.requester.key,
        expires_at=record.expires_at,
        status=record.status.value,
        decided_by=record.decided_by,
        reason=record.reason,
        outcome=record.outcome,
        message=record.notice,
        conversation=record.conversation.id,
        quorum=record.quorum,
        approved_by=tuple(record.approved_by),
        editable=form,
        always=LABELS[record.always],
        notes=() if record.is_question else notes_of(record),
        kind=record.kind.value,
        question=record.question,
        options=tuple(record.options),
        allow_other=record.allow_other,
        answer=record.answer,
    )


def routed(conversation_id: str) -> ConversationRef:
    """A conversation the policy routes approval requests to, by its id alone (the adapter
    of its platform finds where to post from the id)."""
    return ConversationRef(platform=conversation_id.split(":", 1)[0], id=conversation_id)


def copies_of(
    record: ApprovalRecord, notice: ApprovalNotice | None = None
) -> list[tuple[ConversationRef, ApprovalNotice]]:
    """Each posted copy of the record's notice (`notice`, else the record's own), as the
    conversation and the notice to update."""
    notice = notice or notice_of(record)
    return [(routed(copy["conversation"]), replace(notice, message=copy)) for copy in record.copies]


def quorum_line(notice: ApprovalNotice, person: Callable[[str], str] = str) -> str | None:
    """ "1 of 2 approvals (slack:U1)" while a pending call needs more than one approver;
    `person` renders an actor key the platform's way."""
    if notice.quorum < 2 or notice.status != "pending":
        return None
    got = len(notice.approved_by)
    by = f" ({', '.join(map(person, notice.approved_by))})" if got else ""
    return f"{got} of {notice.quorum} approvals{by}: needs {notice.quorum} distinct approvers"


# Approval statuses as people read them (the record's own names are for operators and code).
STATUS_WORDS = {
    "pending": "waiting",
    "executing": "running",
    "consumed": "done",
    "outcome_unknown": "outcome unknown",
}


def said(status: str) -> str:
    """A status as people read it: "done", not "consumed"."""
    return STATUS_WORDS.get(status, status.replace("_", " "))


def transition_message(approval_id: str, transition: Transition, noun: str = "approval") -> str:
    if transition.outcome in ("already", "wrong_status"):
        status = said(transition.status or "settled")
        if transition.decided_by:
            return f"{noun} {approval_id} was already decided by {transition.decided_by} ({status})"
        return f"{noun} {approval_id} is already {status}"
    template = TRANSITION_MESSAGES.get(transition.outcome, "{noun} {id}: " + transition.outcome)
    return template.format(id=approval_id, noun=noun)


def is_last(checkpoint: Checkpoint) -> bool:
    """The suspended call is the last of its model turn (never for an item of a batch: its
    resume lets the session go once it answered them all)."""
    return not checkpoint.batch and checkpoint.index == len(checkpoint.calls) - 1


def rejection(call: ToolCall, decider: str, reason: str | None) -> ToolResult:
    """A rejected call's result, for the model; `decider`: an actor key."""
    return ToolResult(
        call_id=call.id,
        tool=call.name,
        status=ToolStatus.DENIED,
        model_text=(
            f"rejected by {decider}: {reason or 'no reason given'}; the tool was not executed"
        ),
        display=f"{call.name} rejected by {decider}",
    )


def unanswered(
    calls: Sequence[ToolCall], text: str, status: ToolStatus, rest: str | None = None
) -> list[Message]:
    """Answers for calls that will not run: `text` for the first, `rest` (else `text`) for
    the others, so every call of a batch keeps exactly one tool message."""
    return [
        ToolMessage(
            tool_call_id=c.id,
            name=c.name,
            content=text if i == 0 or rest is None else rest,
            status=status,
        )
        for i, c in enumerate(calls)
    ]


def not_executed(call: ToolCall, why: str) -> ToolResult:
    return ToolResult(
        call_id=call.id,
        tool=call.name,
        status=ToolStatus.ERROR,
        model_text=f"not executed: {why}",
        display=f"{call.name} not executed: {why}",
    )


OPEN = (ApprovalStatus.PENDING, ApprovalStatus.EXECUTING)


async def open_notices(
    approvals: ApprovalStore, conversation: ConversationRef | None = None
) -> list[ApprovalNotice]:
    """The notices of open approvals (pending or executing), of one conversation or all."""
    notices = []
    for approval_id in await approvals.open_ids():
        loaded = await approvals.load(approval_id)
        if loaded is None or loaded[0].status not in OPEN:
            continue
        record, checkpoint = loaded
        if conversation is None or record.conversation.id == conversation.id:
            notices.append(notice_of(record, checkpoint.id if checkpoint.batch else ""))
    return notices


def shown_fields(record: ApprovalRecord) -> dict[str, Any]:
    """What of a record may quote the call, redacted as a notice shows it (secrets in the
    arguments masked as data: under a secret-sounding key, or in the text of a value)."""
    try:
        arguments = canonical_json(redact(json.loads(record.arguments)))
    except json.JSONDecodeError:
        arguments = redact_text(record.arguments)
    return {
        "arguments": arguments,
        "reasons": [redact_text(reason) for reason in record.reasons],
        "reason": record.reason and redact_text(record.reason),
        "outcome": record.outcome and redact_text(record.outcome),
        # A question's words are the model's (it may quote a secret it read), the answer
        # the requester's.
        "question": redact_text(record.question),
        "options": [redact_text(option) for option in record.options],
        "answer": record.answer and redact_text(record.answer),
    }
