"""`clawgate approvals list|show|approve|reject [--json]`: the operator's view, straight from
Redis. A table or `key: value` lines in a terminal, JSON with --json; a refusal exits 1 with one
line on stderr.

Decisions made here are recorded as `operator:<login>` and may come from outside the
originating conversation; the resumed run answers in that conversation when its platform is
configured here (as for serve), else here (see bot/cli_run.py)."""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

from bot.tables import print_table
from runtime.agent import Runtime
from runtime.approval.grants import GrantTerms
from runtime.approval.models import ApprovalRecord
from runtime.canonical import canonical_json
from runtime.channel import ApprovalNotice
from runtime.models import Actor
from runtime.redact import redact, redact_text, shown, visible

COLUMNS = (
    "ID",
    "STATUS",
    "TOOL",
    "CONVERSATION",
    "REQUESTER",
    "EXPIRES (UTC)",
    "BATCH",
    "ARGUMENTS",
)


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def in_scope(conversation: str, ref: str) -> bool:
    """Whether `ref` is the conversation or a prefix of it cut at a colon (as scopes are)."""
    return conversation == ref or conversation.startswith(ref + ":")


def rows(notices: list[ApprovalNotice]) -> list[tuple[str, ...]]:
    return [
        (
            n.approval_id,
            n.status + (f" {len(n.approved_by)}/{n.quorum}" if n.quorum > 1 else ""),
            n.tool,
            n.conversation,
            n.requester,
            _when(n.expires_at),
            n.batch or "-",
            n.arguments,
        )
        for n in notices
    ]


def _copies(copies: list[dict[str, str]]) -> list[tuple[str, dict[str, str]]]:
    return [(copy.get("conversation", "?"), copy) for copy in copies]


def _redacted(record: ApprovalRecord) -> dict[str, Any]:
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


async def _show(
    runtime: Runtime, approval_id: str, as_json: bool, say: Callable[[str], None]
) -> int:
    """One approval: its fields, every notice posted, and its audit trail."""
    loaded = await runtime.approvals.load(approval_id.strip().lower())
    items = None if loaded is not None else await runtime.approvals.batch_items(approval_id)
    if items is not None:  # a batch's id: its calls, each shown by its own id
        batch = {"batch": approval_id.strip().lower(), "items": items}
        say(json.dumps(batch) if as_json else f"batch {batch['batch']}: {' '.join(items)}")
        return 0
    if loaded is None:
        print(f"clawgate: unknown approval id {approval_id!r}", file=sys.stderr)
        return 1
    record, checkpoint = loaded
    trail = [
        entry
        for entry in await runtime.approvals.audit_entries(record.session)
        if entry.get("approval") == record.id
    ]
    trail = [{k: redact_text(v) if isinstance(v, str) else v for k, v in e.items()} for e in trail]
    # A batch: its id (deciding it decides every item) and its items, in the model's order.
    batch = {"batch": checkpoint.id, "batch_items": checkpoint.batch} if checkpoint.batch else {}
    if as_json:
        dumped = record.model_dump(mode="json")
        dumped |= _redacted(record)
        dumped |= batch
        say(json.dumps({**dumped, "trace": checkpoint.trace_id, "audit": trail}, indent=2))
        return 0
    hidden = {"arguments", "notice", "copies", "schema_version"}
    fields = record.model_dump(mode="json", exclude=hidden)
    for name in ("created_at", "expires_at", "decided_at"):
        if fields.get(name):
            fields[name] = _when(fields[name]) + " UTC"
    fields["conversation"] = record.conversation.id
    fields["requester"] = record.requester.key
    fields |= _redacted(record)
    if batch:
        fields["batch"] = f"{checkpoint.id}  (items: {', '.join(checkpoint.batch)})"
    if checkpoint.trace_id:
        fields["trace"] = f"{checkpoint.trace_id}  (clawgate trace show {checkpoint.trace_id})"
    width = max(map(len, fields)) + 1
    for name, value in fields.items():
        say(shown(f"{name + ':':<{width}} {value if value not in (None, []) else '-'}"))
    for where, message in [(record.conversation.id, record.notice), *_copies(record.copies)]:
        ref = " ".join(f"{k}={v}" for k, v in message.items() if k != "conversation")
        if ref:  # a terminal's notice has no message to point at
            say(visible(f"notice {where}  {ref}"))
    for entry in trail:
        at = _when(int(entry.get("at", "0") or 0))
        rest = " ".join(f"{k}={v}" for k, v in entry.items() if k not in ("at", "approval"))
        say(visible(f"audit  {at}  {rest}"))
    return 0


async def run_approvals_command(runtime: Runtime, args: argparse.Namespace, out: TextIO) -> int:
    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    if args.verb == "list":
        notices = [
            n
            for n in await runtime.pending()
            if (args.status is None or n.status == args.status)
            and (args.conversation is None or in_scope(n.conversation, args.conversation))
        ]
        if args.json:
            say(json.dumps([dataclasses.asdict(n) for n in notices], indent=2))
        elif notices:
            print_table(COLUMNS, rows(notices), out)
        else:
            say("No open approvals.")
        return 0
    if args.verb == "show":
        return await _show(runtime, args.id, args.json, say)
    operator = Actor(platform="operator", user_id=getpass.getuser())
    approve = args.verb == "approve"
    decision = await runtime.decide(
        args.id,
        approve,
        operator,
        None,
        reason=" ".join(args.reason) if not approve else None,
        always=GrantTerms() if approve and args.always else None,
    )
    if not decision.accepted:
        print(f"clawgate: {shown(decision.message)}", file=sys.stderr)
        return 1
    say(shown(decision.message))  # a grant's rule may quote the call
    return 0
