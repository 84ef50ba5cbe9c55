"""Questions to the requester (the `clarify` tool) as approval records of another kind: they
are stored, expire, are listed and resumed like approvals, but only the requester answers,
with an option (its number or its text) or, when allowed, their own words; the answer is
recorded with the decision as the call's result."""

from __future__ import annotations

import json

from runtime.approval.models import ApprovalRecord, ApprovalStatus
from runtime.approval.store import ApprovalStore
from runtime.models import Actor, ToolCall, ToolResult, ToolStatus
from runtime.tools.clarify import ClarifyArgs, option_number

MAX_ANSWER = 2_000  # characters of free text kept
ASKED = "a question to the person who asked"
EXPIRED = "no answer: the question expired before the person who asked answered it"


def question_fields(call: ToolCall) -> dict[str, object]:
    """The record fields of a clarify call (its arguments validated again: the record is
    what people see)."""
    args = ClarifyArgs.model_validate(json.loads(call.arguments or "{}"))
    return {
        "question": args.question,
        "options": list(args.options),
        "allow_other": args.allow_other,
    }


def who(record: ApprovalRecord) -> str:
    return record.requester.name or record.requester.key


def not_yours(record: ApprovalRecord) -> str:
    """What someone else than the requester is told (privately)."""
    return f"Only {who(record)} can answer this question ({record.id}); nothing was changed."


def resolve(record: ApprovalRecord, text: str) -> tuple[str | None, str]:
    """(the answer, "") for `text`: an option's number or its text (any case), or when the
    question allows it the person's own words; else (None, what to tell them)."""
    words = " ".join(text.split())
    options = record.options
    number = option_number(words)
    if number is not None and number <= len(options):
        return options[number - 1], ""
    for option in options:
        if option.casefold() == words.casefold():
            return option, ""
    if record.allow_other and words:
        return words[:MAX_ANSWER], ""
    choices = ", ".join(f"{n}. {option}" for n, option in enumerate(options, 1))
    return None, f"Answer question {record.id} with one of: {choices}."


def answered(call: ToolCall, answer: str) -> ToolResult:
    """The question's result, as the model reads it."""
    return ToolResult(
        call_id=call.id,
        tool=call.name,
        status=ToolStatus.COMPLETED,
        model_text=f"The requester answered: {answer}",
        display=f"answered: {answer}",
    )


async def answered_by(
    approvals: ApprovalStore, pending: str, text: str, actor: Actor
) -> tuple[str | None, str]:
    """(`pending`, ""): `pending`, the decision a session waits for, is a question that `text`,
    a plain message of `actor`'s, answers: theirs, and an option (by number or text), or any
    words when it allows them. (None, how to answer it) for their words that are no answer:
    the message is held, and they are told. (None, "") for anything else: the message is
    handled as usual."""
    loaded = await approvals.load(pending)
    # Only while it waits: an answered question keeps the session's mark until the rest of
    # its batch is answered, and a message then is held, not taken for a second answer.
    record = None if loaded is None else loaded[0]
    if record is None or not record.is_question or record.status is not ApprovalStatus.PENDING:
        return None, ""
    if actor.key != record.requester.key:
        return None, ""
    answer, why = resolve(record, text)
    if answer is None:
        return None, f"{why} This message runs after the answer."
    return record.id, ""
