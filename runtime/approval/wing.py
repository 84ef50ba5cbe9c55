"""The approval wing's one entry point, for the runtime, the operator CLI and the consoles.

`ApprovalView` reads: the open approvals, one record with its trail, and whether a decision
from outside a chat can be taken at all (the CLI refuses at once what a worker would). It
needs only Redis. `ApprovalWing` adds what a process that carries decisions out needs (the
settlement of decided and expired approvals, the decisions, the suspensions, the approved
calls' execution), built once from the bundle they share: the store, the audit trail, the
policies, this process's id and liveness (the owner of the calls it runs)."""

from __future__ import annotations

from pathlib import Path

from runtime.approval.decisions import Decisions, audit_refusal
from runtime.approval.edit import CallEditor
from runtime.approval.execute import ApprovedCalls
from runtime.approval.models import ApprovalRecord, ApprovalStatus, Checkpoint
from runtime.approval.notices import open_notices, transition_message
from runtime.approval.questions import not_yours
from runtime.approval.settle import ReleaseHeld, Settlement
from runtime.approval.store import ApprovalStore, Transition
from runtime.approval.suspend import Suspender
from runtime.audit import AuditLog
from runtime.channel import ApprovalNotice, Send
from runtime.models import Actor, ConversationRef
from runtime.policy.service import PolicyService
from runtime.store.history import HistoryStore
from runtime.tools.registry import ToolRegistry
from runtime.tracing.recorder import Tracer


class ApprovalView:
    def __init__(self, store: ApprovalStore, audit: AuditLog) -> None:
        self.store = store
        self.audit = audit

    async def pending(self, conversation: ConversationRef | None = None) -> list[ApprovalNotice]:
        """Open approvals (pending or executing), of one conversation or all of them."""
        return await open_notices(self.store, conversation)

    async def load(self, approval_id: str) -> tuple[ApprovalRecord, Checkpoint] | None:
        return await self.store.load(approval_id.strip().lower())

    async def trail(self, record: ApprovalRecord) -> list[dict[str, str]]:
        """The approval's entries in its session's audit stream, oldest first."""
        entries = await self.store.audit_entries(record.session)
        return [entry for entry in entries if entry.get("approval") == record.id]

    async def decidable(self, approval_id: str, actor: Actor, attempt: str) -> ApprovalRecord | str:
        """The approval `actor` (deciding from outside its conversation) may send a decision
        for, or why not, audited as a refused decision: an unknown id, one decided already,
        a question (only its asker answers it). A read, not a decision: the worker's atomic
        script checks everything again, so what passes here may still be refused there."""
        loaded = await self.load(approval_id)
        items = None if loaded is not None else await self.store.batch_items(approval_id)
        if items:  # a batch: its lead's session and conversation, addressed by the batch's id
            lead = await self.load(items[0])
            if lead is not None:
                return lead[0].model_copy(update={"id": approval_id.strip().lower()})
        if loaded is None:
            message = f"unknown approval id {approval_id!r}"
            await audit_refusal(
                self.audit, approval_id, actor, "unknown_id", message, attempt=attempt
            )
            return message
        record, checkpoint = loaded
        trace = checkpoint.trace_id
        if record.status is not ApprovalStatus.PENDING:
            found = Transition("already", record.status.value, record.decided_by)
            message = transition_message(record.id, found, record.kind.value)
            await audit_refusal(
                self.audit, record.id, actor, "already_decided", message, record, attempt, trace
            )
            return message
        if record.is_question:
            message = not_yours(record)
            await self.store.audit(record.session, "refused", record.id, actor.key, message)
            await audit_refusal(
                self.audit, record.id, actor, "unauthorized", message, record, attempt, trace
            )
            return message
        return record


class ApprovalWing(ApprovalView):
    """Everything a process needs to suspend runs, decide approvals and run approved calls.
    `send`: the channel's; `release`: runs (or queues) what a session held once its wait
    ended outside a run; `worker_id` and `liveness_ttl`: this process, which owns the
    approved calls it decides and runs until they are consumed (ApprovalStore.decide)."""

    def __init__(
        self,
        store: ApprovalStore,
        audit: AuditLog,
        policies: PolicyService,
        tracer: Tracer,
        send: Send,
        release: ReleaseHeld,
        history: HistoryStore,
        registry: ToolRegistry,
        workdir: Path,
        worker_id: str,
        liveness_ttl: float,
    ) -> None:
        super().__init__(store, audit)
        self.history, self.worker_id, self.liveness_ttl = history, worker_id, liveness_ttl
        self.settlement = Settlement(store, audit, tracer, send, release)
        editor = CallEditor(store, policies, registry, workdir)
        self.decisions = Decisions(
            store, policies, audit, self.settlement, worker_id, liveness_ttl, editor
        )
        self.suspender = Suspender(store, history, audit, send, registry)
        self.approved_calls = ApprovedCalls(store, audit, self.settlement, worker_id, liveness_ttl)
