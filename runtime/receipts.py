"""Tool receipts: a keyed proof that one tool call ran and what it returned.

Each call that runs to completion gets a receipt: an HMAC (runtime/evidence_keys.py, the
ring's current key) over the tool's name, the hash of its canonical arguments (the audit
trail's `args_sha256`), the hash of its result, the session, the approval that let it run
("" when none did), the time it was made (ms) and the key id. Failed, denied, cancelled or
suspended calls, a command that timed out (`ToolResult.unfinished`), and calls answered
without running (a duplicate, invalid arguments) get none.

The result hash (`result_sha256`) is the sha256 of the whole text the tool returned for
the model, before it was cut to CLAWGATE_MAX_TOOL_RESULT_CHARS (ToolResult.artifact when it
was cut, else its model text; an empty output is `(no output)`, which is what the model
read). So when the output was not cut, the tool message in the session's history is
exactly that text and hashes to it.

The receipt is written into the call's `tool_executed` audit entry as flat fields: the
entry's own `tool`, `args_sha256`, `session` and `approval`, and `receipt` (its id),
`result_sha256`, `receipt_at`, `receipt_kid` and `receipt_mac`. Its id is `rc_` and the
first 20 hex digits of the MAC: short, printable, and tied to the MAC it names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime.audit import AuditEntry, AuditLog
from runtime.canonical import text_sha256
from runtime.evidence_keys import KeyRing, encode
from runtime.models import ToolResult, ToolStatus

log = logging.getLogger(__name__)

PREFIX = "rc_"
ID_HEX = 20
DOMAIN = "clawgate.receipt.v1"  # a receipt's MAC can never pass for another record's
# The audit entry's fields a receipt is rebuilt from (entry field -> receipt field).
FIELDS = {
    "receipt": "id",
    "tool": "tool",
    "args_sha256": "args_sha256",
    "result_sha256": "result_sha256",
    "session": "session",
    "approval": "approval",
    "receipt_at": "at",
    "receipt_kid": "kid",
    "receipt_mac": "mac",
}


class Receipt(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    tool: str
    args_sha256: str
    result_sha256: str
    session: str
    approval: str = ""
    at: int  # ms since the epoch
    kid: str
    mac: str

    def message(self) -> bytes:
        """What the MAC is over: every field but the id and the MAC, unambiguously."""
        return _message(self.model_dump(exclude={"id", "mac"}))

    def audit_fields(self) -> dict[str, str]:
        """The fields the `tool_executed` entry does not carry already."""
        return {
            "receipt": self.id,
            "result_sha256": self.result_sha256,
            "receipt_at": str(self.at),
            "receipt_kid": self.kid,
            "receipt_mac": self.mac,
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> Receipt | None:
        """The receipt a `tool_executed` entry records (None: it records none)."""
        if not fields.get("receipt"):
            return None
        data: dict[str, str | int] = {name: fields.get(key, "") for key, name in FIELDS.items()}
        try:
            data["at"] = int(fields.get("receipt_at", ""))
        except ValueError:
            data["at"] = -1  # fails verification, as any other changed field does
        return cls.model_validate(data)


def result_text(result: ToolResult) -> str:
    """The whole text a call returned (before any cut): what `result_sha256` is over."""
    return result.artifact if result.artifact is not None else result.model_text


def issue(
    ring: KeyRing,
    *,
    tool: str,
    args_sha256: str,
    result_sha256: str,
    session: str,
    approval: str = "",
    at: int | None = None,
) -> Receipt:
    """A receipt under the ring's current key, made now unless `at` (ms) is given."""
    fields: dict[str, Any] = {
        "tool": tool,
        "args_sha256": args_sha256,
        "result_sha256": result_sha256,
        "session": session,
        "approval": approval,
        "at": int(time.time() * 1000) if at is None else at,
        "kid": ring.current,
    }
    mac = ring.mac(_message(fields), ring.current)
    # Unvalidated: every value is of its field's type already (this runs on every call).
    return Receipt.model_construct(id=PREFIX + mac[:ID_HEX], mac=mac, **fields)


def _message(fields: Mapping[str, Any]) -> bytes:
    parts = ("tool", "args_sha256", "result_sha256", "session", "approval")
    return encode(DOMAIN, *(fields[p] for p in parts), str(fields["at"]), fields["kid"])


def for_result(
    ring: KeyRing,
    result: ToolResult,
    args_sha256: str | None,
    session: str,
    approval: str | None,
) -> Receipt | None:
    """The receipt of a call's result: only for one that completed (and finished: not a
    command that timed out). Never raises (a receipt that cannot be made is logged and left
    out: the call has run)."""
    if result.status is not ToolStatus.COMPLETED or result.unfinished:
        return None
    try:
        return issue(
            ring,
            tool=result.tool,
            args_sha256=args_sha256 or "",
            result_sha256=text_sha256(result_text(result)),
            session=session,
            approval=approval or "",
        )
    except Exception as exc:
        log.warning("receipt: none made for a %s call: %s", result.tool, type(exc).__name__)
        return None


def verify(ring: KeyRing, receipt: Receipt) -> str | None:
    """None when the receipt is genuine under `ring`; else why not, in a few words."""
    if receipt.kid not in ring.keys:
        held = ", ".join(ring.keys) or "none"
        return (
            f"it was made with key id {receipt.kid!r}, which this key ring does not hold "
            f"(it holds: {held}; see CLAWGATE_AUDIT_KEY / CLAWGATE_AUDIT_KEY_FILE)"
        )
    if receipt.id != PREFIX + receipt.mac[:ID_HEX]:
        return "receipt_mac was changed: it no longer matches the receipt's id"
    if not ring.check(receipt.message(), receipt.mac, receipt.kid):
        return (
            "the MAC does not match the recorded fields: one of tool, args_sha256, "
            "result_sha256, session, approval or receipt_at was changed (or the key's "
            "secret is not the one it was made with)"
        )
    return None


def changed_result(ring: KeyRing, receipt: Receipt, result_sha256: str) -> bool:
    """Whether the receipt verifies once its result hash is `result_sha256` (another record's
    hash of the same result): then its recorded `result_sha256` is what was changed."""
    if result_sha256 == receipt.result_sha256 or receipt.kid not in ring.keys:
        return False
    fixed = receipt.model_copy(update={"result_sha256": result_sha256})
    return ring.check(fixed.message(), receipt.mac, receipt.kid)


# --- finding receipts in the global audit trail ----------------------------------------------


async def find(audit: AuditLog, receipt_id: str) -> AuditEntry | None:
    """The `tool_executed` entry that records receipt `receipt_id`, newest first."""
    async for entry in audit.backwards():
        if entry.fields.get("receipt") == receipt_id and entry.event == "tool_executed":
            return entry
    return None


async def of_approval(audit: AuditLog, approval_id: str, since_ms: int) -> AuditEntry | None:
    """The `tool_executed` entry with a receipt of the call that approval `approval_id` let
    run, looked for among the entries since `since_ms` (its decision)."""
    async for entry in audit.since(since_ms):
        fields = entry.fields
        ran = entry.event == "tool_executed" and fields.get("approval") == approval_id
        if ran and fields.get("receipt"):
            return entry
    return None
