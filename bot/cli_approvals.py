"""`clawgate approvals list|show|approve|reject [--json]`: the operator's view, straight from
Redis. A table or `key: value` lines in a terminal, JSON with --json; a refusal exits 1 with one
line on stderr.

Decisions made here are recorded as `operator:<login>` by the worker that carries them out:
this command reads the record (refusing at once an unknown id or one decided already),
queues the decision in the approval's session lane, and prints what the worker answers on
the request's reply list (runtime/queue/remote.py); `--wait` follows the outcome until it
ends. A `clawgate chat` conversation has no worker: its decisions run here, in this shell's
work dir, and show in the chat (bot/cli_run.py)."""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TextIO

from bot.errors import Unavailable
from bot.tables import print_table
from runtime.approval.models import ApprovalRecord
from runtime.approval.notices import shown_fields
from runtime.approval.wing import ApprovalView
from runtime.channel import ApprovalNotice
from runtime.models import Actor, ToolStatus
from runtime.policy.approvers import OPERATOR_PLATFORM
from runtime.queue.inbound import DecisionRequest
from runtime.queue.ingest import Ingest, IngestUnavailable
from runtime.queue.remote import Replies, decision_request, send_decision
from runtime.receipts import Receipt, of_approval
from runtime.redact import redact_text, shown, visible

# Carries a decision out (queued for a worker, or here for a `clawgate chat` conversation);
# returns the exit code.
Deliver = Callable[[ApprovalRecord, Actor, DecisionRequest], Awaitable[int]]
REFUSED = 1  # the decision was refused (here, or by the worker); the reason is on stderr
QUEUED = 3  # no worker took it in time: it waits in the inbox and runs when a worker does
FAILED = 4  # the worker failed to carry it out, or (--wait) the call or its run failed
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


async def _receipt(view: ApprovalView, record: ApprovalRecord) -> Receipt | None:
    """The receipt of the approved call's execution, from the global audit trail (read from
    its decision on); None when it did not complete (or was not approved)."""
    if record.decided_at is None or record.outcome != ToolStatus.COMPLETED.value:
        return None  # not looked for: nothing after the decision would hold it
    entry = await of_approval(view.audit, record.id, record.decided_at)
    return None if entry is None else Receipt.from_fields(entry.fields)


async def _show(
    view: ApprovalView, approval_id: str, as_json: bool, say: Callable[[str], None]
) -> int:
    """One approval: its fields, every notice posted, its audit trail, and the receipt of
    the call it let run."""
    loaded = await view.load(approval_id)
    items = None if loaded is not None else await view.store.batch_items(approval_id)
    if items is not None:  # a batch's id: its calls, each shown by its own id
        batch = {"batch": approval_id.strip().lower(), "items": items}
        say(json.dumps(batch) if as_json else f"batch {batch['batch']}: {' '.join(items)}")
        return 0
    if loaded is None:
        print(f"clawgate: unknown approval id {approval_id!r}", file=sys.stderr)
        return 1
    record, checkpoint = loaded
    trail = await view.trail(record)
    trail = [{k: redact_text(v) if isinstance(v, str) else v for k, v in e.items()} for e in trail]
    # A batch: its id (deciding it decides every item) and its items, in the model's order.
    batch = {"batch": checkpoint.id, "batch_items": checkpoint.batch} if checkpoint.batch else {}
    receipt = await _receipt(view, record)
    if as_json:
        dumped = record.model_dump(mode="json")
        dumped |= shown_fields(record)
        dumped |= batch
        dumped["receipt"] = None if receipt is None else receipt.model_dump(mode="json")
        say(json.dumps({**dumped, "trace": checkpoint.trace_id, "audit": trail}, indent=2))
        return 0
    hidden = {"arguments", "notice", "copies", "schema_version"}
    fields = record.model_dump(mode="json", exclude=hidden)
    for name in ("created_at", "expires_at", "decided_at"):
        if fields.get(name):
            fields[name] = _when(fields[name]) + " UTC"
    fields["conversation"] = record.conversation.id
    fields["requester"] = record.requester.key
    fields |= shown_fields(record)
    if batch:
        fields["batch"] = f"{checkpoint.id}  (items: {', '.join(checkpoint.batch)})"
    if checkpoint.trace_id:
        fields["trace"] = f"{checkpoint.trace_id}  (clawgate trace show {checkpoint.trace_id})"
    if receipt is not None:
        fields["receipt"] = (
            f"{receipt.id}  (result sha256 {receipt.result_sha256[:12]}, key {receipt.kid}; "
            f"clawgate audit receipt {receipt.id})"
        )
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


async def run_approvals_command(
    view: ApprovalView, args: argparse.Namespace, out: TextIO, deliver: Deliver | None = None
) -> int:
    """`deliver`: how a decision is carried out (`approve` and `reject` need it)."""

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    if args.verb == "list":
        notices = [
            n
            for n in await view.pending()
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
        return await _show(view, args.id, args.json, say)
    operator = Actor(platform=OPERATOR_PLATFORM, user_id=getpass.getuser())
    checked = await view.decidable(args.id, operator, args.verb)
    if isinstance(checked, str):
        print(f"clawgate: {shown(checked)}", file=sys.stderr)
        return REFUSED
    approve = args.verb == "approve"
    reason = None if approve else " ".join(args.reason) or None
    request = decision_request(approve, reason, always=approve and args.always)
    assert deliver is not None, "deciding needs a way to carry the decision out"
    return await deliver(checked, operator, request)


async def through_workers(
    ingest: Ingest,
    replies: Replies,
    record: ApprovalRecord,
    actor: Actor,
    request: DecisionRequest,
    wait: bool,
    timeout_s: float,
    out: TextIO,
) -> int:
    """Queue the decision for the workers, then print what they answer (see `follow`)."""
    try:
        await send_decision(ingest, record, actor, request)
    except IngestUnavailable as exc:
        raise Unavailable(f"cannot queue the decision in Redis ({exc})") from exc
    return await follow(replies, record, request, wait, timeout_s, out)


async def follow(
    replies: Replies,
    record: ApprovalRecord,
    request: DecisionRequest,
    wait: bool,
    timeout_s: float,
    out: TextIO,
) -> int:
    """Print what the worker answers on the request's reply list: the decision as recorded
    (or refused), then with `wait` every step until the last. Each step waits `timeout_s`."""
    steps: list[str] = []
    while (reply := await replies.pop(request.reply, timeout_s)) is not None:
        steps.append(reply.step)
        if reply.step == "refused":
            print(f"clawgate: {shown(reply.text)}", file=sys.stderr)
            return REFUSED
        out.write(shown(reply.text) + "\n")  # a grant's rule may quote the call
        out.flush()
        if reply.final or not wait:
            return FAILED if "failed" in steps else 0
    if not steps:
        out.write(
            f"Approval {record.id}: no worker took the decision within {timeout_s:g} s; it is "
            "queued and will be carried out when a worker runs (nothing is lost).\n"
        )
    else:
        out.write(
            f"Approval {record.id}: still running after {timeout_s:g} s; follow it in "
            f"{record.conversation.id} or with `clawgate approvals show {record.id}`.\n"
        )
    out.flush()
    return QUEUED
