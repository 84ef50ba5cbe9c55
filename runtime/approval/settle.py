"""How approvals end without a resume (expired, withdrawn, outcome unknown), and the sweeper
that finds the ones nobody will decide or finish: each ending updates the notice, answers
the rest of the batch in history, and lets the session's held messages run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from runtime.approval.models import ApprovalRecord, ApprovalStatus, Checkpoint
from runtime.approval.notices import batch_notice, copies_of, notice_of, unanswered
from runtime.approval.questions import EXPIRED
from runtime.approval.remind import Reminders
from runtime.approval.store import ApprovalStore
from runtime.audit import AuditLog
from runtime.channel import ApprovalUpdated, Reply, Send
from runtime.metrics import APPROVALS
from runtime.models import ToolStatus
from runtime.store.history import encode_message
from runtime.store.runs import NOT_STARTED, UNMARKED, call_marks
from runtime.tracing.recorder import Tracer

EXPIRED_CALL = "not executed: the approval request expired"
# Lets a session's held messages run once its wait ended (in this process, or queued); for a
# batch whose last open item expired, its resume (see Runtime.release_held).
ReleaseHeld = Callable[[ApprovalRecord], Awaitable[None]]


class Settlement:
    def __init__(
        self,
        approvals: ApprovalStore,
        audit: AuditLog,
        tracer: Tracer,
        send: Send,
        release: ReleaseHeld,
    ) -> None:
        self.approvals = approvals
        self.audit = audit
        self.tracer = tracer
        self.send = send
        self.release = release
        self.reminders = Reminders(approvals, audit, send)

    async def update_notice(self, record: ApprovalRecord, checkpoint: Checkpoint) -> None:
        """The notice in its thread and every copy of it, updated in place: a batch's one
        notice (its lead's) with every item as it stands, `record` as given."""
        notice = notice_of(record)
        if checkpoint.batch:
            items = [r for r, _ in await self.approvals.load_batch(checkpoint)]
            items = [record if r.id == record.id else r for r in items]
            record = items[0]
            notice = replace(batch_notice(items, checkpoint.id), message=record.notice)
        await self.send(record.conversation, ApprovalUpdated(notice))
        for where, copy in copies_of(record, notice):
            await self.send(where, ApprovalUpdated(copy))

    async def sweep(self) -> int:
        """Expire overdue approvals, settle calls whose executing process died, and remind
        of or escalate the ones the policy says (remind.py). Returns how many changed."""
        changed = 0
        now = await self.approvals.server_time_ms()
        for approval_id in await self.approvals.overdue_ids(now):
            loaded = await self.approvals.load(approval_id)
            if loaded is None or loaded[0].status is not ApprovalStatus.PENDING:
                await self.approvals.forget(approval_id)
                continue
            record, checkpoint = loaded
            if (await self.approvals.expire(record)).ok:
                changed += 1
                await self.approvals.forget(approval_id)
                await self.after_expiry(record, checkpoint)
        for approval_id in await self.approvals.executing_ids():
            loaded = await self.approvals.load(approval_id)
            if loaded is None or loaded[0].status is not ApprovalStatus.EXECUTING:
                await self.approvals.forget(approval_id)
                continue
            record, checkpoint = loaded
            if record.worker is None or await self.approvals.worker_alive(record.worker):
                continue
            if (await self.approvals.mark_outcome_unknown(record, record.worker)).ok:
                changed += 1
                await self.approvals.forget(approval_id)
                await self.after_outcome_unknown(record, checkpoint)
        return changed + await self.reminders.sweep(now)

    async def after_expiry(self, record: ApprovalRecord, checkpoint: Checkpoint) -> None:
        record = record.model_copy(update={"status": ApprovalStatus.EXPIRED})
        APPROVALS.labels("expired").inc()
        await self.audit.record(
            "approval_expired",
            approval=record.id,
            tool=record.tool,
            session=record.session,
            conversation=record.conversation.id,
            requester=record.requester.key,
            trace=checkpoint.trace_id,
        )
        await self.trace_ending("approval.expired", record, checkpoint)
        await self.update_notice(record, checkpoint)
        if not checkpoint.batch:  # a batch is answered by its resume, once no item waits
            expired = EXPIRED if record.is_question else EXPIRED_CALL
            await self.close_batch(record, checkpoint, expired, ToolStatus.CANCELLED)
        await self.release(record)

    async def after_outcome_unknown(
        self, record: ApprovalRecord, checkpoint: Checkpoint, run_held: bool = True
    ) -> None:
        record = record.model_copy(
            update={
                "status": ApprovalStatus.OUTCOME_UNKNOWN,
                "outcome": "the process executing it stopped",
            }
        )
        APPROVALS.labels("outcome_unknown").inc()
        await self.audit.record(
            "approval_outcome_unknown",
            approval=record.id,
            tool=record.tool,
            kind=await self._kind(record, checkpoint),
            session=record.session,
            conversation=record.conversation.id,
            decided_by=record.decided_by,
            outcome=record.outcome,
            trace=checkpoint.trace_id,
        )
        await self.trace_ending("approval.outcome_unknown", record, checkpoint)
        await self.update_notice(record, checkpoint)
        await self.send(
            record.conversation,
            Reply(
                f"The approved {record.tool} call ({record.id}) was interrupted while it ran: "
                "it may or may not have taken effect, and it will not be run again."
            ),
        )
        unknown = "outcome unknown: the process executing this call stopped; it was not run again"
        if checkpoint.batch:  # its own answer: the resume of its batch goes on after it
            message = unanswered([checkpoint.calls[checkpoint.index]], unknown, ToolStatus.ERROR)
            encoded = [encode_message(m) for m in message]
            await self.approvals.close(checkpoint.session, checkpoint.batch[0], encoded, False)
            return
        await self.close_batch(record, checkpoint, unknown, ToolStatus.ERROR)
        if run_held:
            await self.release(record)

    async def _kind(self, record: ApprovalRecord, checkpoint: Checkpoint) -> str:
        """What the approved call was, as marked before it started (runtime/store/runs.py);
        `not-started`: its process died before it did (it is settled all the same: only the
        decision's own retake could run it, and nothing tells when that comes)."""
        marks = await call_marks(self.approvals.redis, self.approvals.keys, record.session)
        if marks is None:
            return UNMARKED
        mark = marks.get(checkpoint.calls[checkpoint.index].id)
        return NOT_STARTED if mark is None else mark.kind

    async def trace_ending(
        self,
        name: str,
        record: ApprovalRecord,
        checkpoint: Checkpoint,
        cancelled_by: str | None = None,
    ) -> None:
        """A one-span trace linked to the paused run, for an approval that ended without a
        resume (expired, cancelled, outcome unknown): `trace show` draws it under the pause."""
        if checkpoint.trace_id is None:
            return
        async with self.tracer.trace(
            name,
            session=record.session,
            resumes=checkpoint.trace_id,
            origin=checkpoint.trace_origin,
            approval_id=record.id,
            tool=record.tool,
            cancelled_by=cancelled_by,
            conversation=record.conversation.id,
        ) as trace:
            if trace.trace is not None:
                trace.trace.root.end(name.removeprefix("approval."))

    async def close_batch(
        self, record: ApprovalRecord, checkpoint: Checkpoint, text: str, status: ToolStatus
    ) -> None:
        """A run ends at its suspended call: give that call and the rest of its batch a result
        in history, so the conversation stays well-formed for the model; then the session
        stops waiting. A batch's from its first call on (none of it was carried out)."""
        calls = checkpoint.calls[checkpoint.start if checkpoint.batch else checkpoint.index :]
        messages = unanswered(
            calls, text, status, rest="not executed: the run ended before this call"
        )
        lead = checkpoint.batch[0] if checkpoint.batch else record.id
        await self.approvals.close(checkpoint.session, lead, [encode_message(m) for m in messages])
