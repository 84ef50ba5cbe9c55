"""A decision made outside a chat, carried out by the worker that took its inbox entry:
decided through the same path as a click (so this process owns the approved call and runs it
in its work dir and sandbox; the answer and every notice update go to the conversation), and
each step told to the decider's reply list (runtime/queue/remote.py)."""

from __future__ import annotations

import logging

from runtime.agent import Runtime
from runtime.approval.models import ApprovalRecord, ApprovalStatus
from runtime.approval.notices import said as status_said
from runtime.models import RunResult, StopReason
from runtime.queue.inbound import Inbound
from runtime.queue.remote import Replies, Reply
from runtime.store.connection import OUTAGES

log = logging.getLogger(__name__)

# What the thread got when the resumed run stopped, by how it stopped.
STOPPED = {
    StopReason.FINAL: "the run answered in {where}",
    StopReason.APPROVAL_REQUIRED: "the run waits for another approval ({approval}) in {where}",
    StopReason.MAX_STEPS: "the run stopped at its step limit; said in {where}",
    StopReason.CANCELLED: "the run was cancelled; said in {where}",
    StopReason.ERROR: "the run failed ({error}); said in {where}",
    StopReason.REPEATED_CALLS: "the run stopped repeating the same call; said in {where}",
}
# The approval's end, for a call that did not complete.
FAILED = (ApprovalStatus.OUTCOME_UNKNOWN, ApprovalStatus.EXPIRED)


def decided_text(record: ApprovalRecord, note: str = "") -> str:
    if record.status is ApprovalStatus.REJECTED:
        return f"Approval {record.id} rejected by {record.decided_by}; the model is told.{note}"
    return f"Approval {record.id} approved by {record.decided_by}; a worker runs it.{note}"


def outcome(record: ApprovalRecord | None, run: RunResult | None) -> list[Reply]:
    """What came of a decided approval once its run stopped: the call, then the thread."""
    replies = []
    if record is not None and record.status is ApprovalStatus.CONSUMED:
        ran = record.outcome or "done"
        step = "ran" if ran == "completed" else "failed"
        replies.append(Reply(step=step, text=f"The call ran in a worker: {ran}."))
    elif record is not None and record.status in FAILED:
        shown = record.outcome or status_said(record.status)
        replies.append(Reply(step="failed", text=f"The call did not complete: {shown}."))
    if run is not None:
        where = record.conversation.id if record is not None else run.session
        said = STOPPED[run.stop_reason].format(
            where=where, approval=run.approval_id, error=run.error
        )
        step = "failed" if run.stop_reason is StopReason.ERROR else "answered"
        replies.append(Reply(step=step, text=said[0].upper() + said[1:] + "."))
    if not replies:
        replies.append(Reply(step="answered", text="Nothing more came of it here."))
    return [*replies[:-1], replies[-1].model_copy(update={"final": True})]


async def carry_out(runtime: Runtime, inbound: Inbound, job: str) -> RunResult | None:
    """Decide `inbound.decision` as `inbound.actor` (its inbox entry: `job`, so a delivery
    again continues what it began) and tell the decider each step."""
    request = inbound.decision
    assert request is not None and inbound.approval_id is not None
    replies = Replies(runtime.approvals.redis, runtime.approvals.keys)
    told = False

    async def recorded(record: ApprovalRecord, note: str) -> None:
        nonlocal told
        told = True
        await replies.push(request.reply, Reply(step="decided", text=decided_text(record, note)))

    try:
        decision = await runtime.decide(
            inbound.approval_id,
            request.approve,
            inbound.actor,
            inbound.conversation if request.console else None,
            reason=request.reason,
            always=request.grant(),
            job=job,
            edit=request.edit,
            recorded=recorded,
        )
    except OUTAGES:
        raise  # the job is tried again: the decider keeps waiting
    except Exception:
        failed = f"The worker failed while carrying it out (logged as job {job})."
        await replies.push(request.reply, Reply(step="failed", text=failed, final=True))
        raise
    if not decision.accepted:
        await replies.push(request.reply, Reply(step="refused", text=decision.message, final=True))
        return None
    loaded = await runtime.approvals.load(inbound.approval_id)
    record = loaded[0] if loaded is not None else None
    if not told:  # counted toward a quorum, or continued after a restart
        counted = record is not None and record.status is ApprovalStatus.PENDING
        text = decision.message if counted or record is None else decided_text(record)
        await replies.push(request.reply, Reply(step="decided", text=text, final=counted))
        if counted:
            return None
    for reply in outcome(record, decision.run):
        await replies.push(request.reply, reply)
    return decision.run
