"""Checking one receipt (`clawgate audit receipt <id>`): find the audit entry that records it,
recompute its MAC with the key ring, and compare the session's history with it.

The history holds the call's tool message as long as the session keeps it. When the output
was not cut for the model, that message is the very text `result_sha256` is over, so it must
hash to it: a difference means the history was changed after the call ran. When it was cut,
the history holds only the cut text and is not compared (said so). When the MAC fails and the
history's text would make it pass, the audit entry's `result_sha256` is what was changed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from runtime.audit import AuditLog
from runtime.canonical import text_sha256
from runtime.evidence_keys import UNKEYED, KeyRing
from runtime.models import ToolMessage
from runtime.receipts import Receipt, changed_result, find, verify
from runtime.store.history import HistoryStore

CUT_MARK = "\n[output cut at "  # how the executor ends a result it cut (runtime/executor.py)
# What the session's history says of the call's result.
HistoryState = Literal["matches", "differs", "cut", "absent"]


class ReceiptCheck(BaseModel):
    """The outcome: `receipt` None when no audit entry records the id."""

    id: str
    verified: bool
    why: str = ""  # why not, when not verified
    entry: str = ""  # the audit entry's stream id
    receipt: Receipt | None = None
    keyed: bool = True  # made with a real key (not the unkeyed ring's)
    history: HistoryState = "absent"


async def _history_message(history: HistoryStore, session: str, call: str) -> ToolMessage | None:
    for message in reversed(await history.load(session)):
        if isinstance(message, ToolMessage) and message.tool_call_id == call:
            return message
    return None


def _history_state(message: ToolMessage | None, receipt: Receipt) -> HistoryState:
    if message is None:
        return "absent"
    if text_sha256(message.content) == receipt.result_sha256:
        return "matches"
    return "cut" if CUT_MARK in message.content else "differs"


async def check(
    audit: AuditLog, history: HistoryStore, ring: KeyRing, receipt_id: str
) -> ReceiptCheck:
    """Raises what Redis raises when it cannot be read."""
    entry = await find(audit, receipt_id)
    if entry is None:
        missing = "no audit entry records it (unknown id, or trimmed: CLAWGATE_AUDIT_MAXLEN)"
        return ReceiptCheck(id=receipt_id, verified=False, why=missing)
    receipt = Receipt.from_fields(entry.fields)
    assert receipt is not None  # found by its `receipt` field
    message = await _history_message(history, receipt.session, entry.fields.get("call", ""))
    state = _history_state(message, receipt)
    why: str | None = verify(ring, receipt)
    if why is not None and message is not None:
        if changed_result(ring, receipt, text_sha256(message.content)):
            why = (
                "result_sha256 was changed in the audit entry: the MAC matches the hash of the "
                "result the session's history holds"
            )
    elif why is None and state == "differs":
        why = (
            "the receipt is genuine, but the session's history holds a different result for "
            "this call: the history was changed after the call ran"
        )
    return ReceiptCheck(
        id=receipt_id,
        verified=why is None,
        why=why or "",
        entry=entry.id,
        receipt=receipt,
        keyed=receipt.kid != UNKEYED,
        history=state,
    )
