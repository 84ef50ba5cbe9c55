"""Suspending a run at a call that needs a human: one atomic write of the approval record
and the run's checkpoint (never a copy of the history), then the notice to the originating
conversation. Nothing waits in memory: any process may resume it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from runtime.approval.always import audited_rule, cover_of
from runtime.approval.changes import Changed
from runtime.approval.models import (
    AlwaysCover,
    ApprovalRecord,
    Checkpoint,
    Kind,
    call_hash,
    new_approval_id,
)
from runtime.approval.notices import batch_notice, notice_of, routed, unanswered
from runtime.approval.questions import ASKED, question_fields
from runtime.approval.store import ApprovalStore
from runtime.audit import AuditLog
from runtime.canonical import canonical_arguments
from runtime.channel import ApprovalRequested, Reply, Send
from runtime.metrics import APPROVALS
from runtime.models import RunResult, StopReason, ToolCall, ToolResult, ToolStatus
from runtime.policy.model import DIRECT
from runtime.policy.resolve import EffectivePolicy
from runtime.redact import redact_text
from runtime.store.connection import OUTAGES
from runtime.store.history import HistoryStore, encode_message
from runtime.tools.base import Tool
from runtime.tools.clarify import ClarifyTool
from runtime.tools.registry import ToolRegistry
from runtime.trace_context import current_trace_id, current_trace_origin
from runtime.tracing import hooks as tracing

if TYPE_CHECKING:  # the loop's own types: the loop never imports approvals
    from runtime.loop import RunState, Suspension

log = logging.getLogger(__name__)
Fields = dict[str, Any]


def _routes(policy: EffectivePolicy | None, requester: str, also: Sequence[str] = ()) -> list[str]:
    """Where the request goes besides its thread: conversation ids, and for "dm" the people
    who may decide it (the approvers, else the admins; never the requester). `also`: more
    targets than the policy's `notify` (an admin hook's route)."""
    if policy is None:
        return []
    routes: list[str] = []
    for target in dict.fromkeys([*policy.notify, *also]):
        if target == policy.conversation:
            continue
        if target == DIRECT:
            people = sorted(policy.approvers or policy.admins)
            routes += [p for p in people if p != requester and ":" in p]
        else:
            routes.append(target)
    return list(dict.fromkeys(routes))


def _reminders(policy: EffectivePolicy | None) -> dict[str, Any]:
    """The record's reminder and escalation times, from the conversation's policy."""
    if policy is None:
        return {}
    remind, escalate = policy.remind_after, policy.escalate_after
    return {
        "remind_after_ms": None if remind is None else int(remind * 1000),
        "escalate_after_ms": None if escalate is None else int(escalate * 1000),
        "escalate_to": sorted(policy.escalate_to),
    }


def _question(call: ToolCall) -> Fields:
    """A question's record fields: asked of the requester alone (no copies, no quorum, no
    reminders), never "approved always"."""
    return {
        "kind": Kind.QUESTION,
        "always": AlwaysCover.NEVER,
        "no_always": ASKED,
        **question_fields(call),
    }


def too_many(pending: int) -> str:
    return (
        f"You have {pending} approvals pending; answer or cancel some first (/pending lists "
        "them). This call was not executed."
    )


class Suspender:
    def __init__(
        self,
        approvals: ApprovalStore,
        history: HistoryStore,
        audit: AuditLog,
        send: Send,
        registry: ToolRegistry | None = None,
    ) -> None:
        """`send`: the channel's, whose answer is the platform's reference to the notice;
        `registry`: the tools, to tell what an "approve always" of a call would cover."""
        self.approvals = approvals
        self.history = history
        self.audit = audit
        self.send = send
        self.registry = registry

    async def suspend(
        self, state: RunState, suspension: Suspension, result: RunResult
    ) -> RunResult:
        """Checkpoint a suspended run: one atomic write of the approval record and the
        checkpoint, then the notice to the originating conversation. Nothing waits."""
        ctx = state.ctx
        assert ctx.actor is not None and ctx.conversation is not None
        call = suspension.calls[suspension.index]
        checkpoint = Checkpoint(
            id=new_approval_id(),
            session=state.session,
            conversation=ctx.conversation,
            actor=ctx.actor,
            step=suspension.step,
            calls=suspension.calls,
            index=suspension.index,
            prior_results=suspension.prior,
            history_len=state.end + len(suspension.unsaved),  # the session's, not the window's
            trace_id=current_trace_id(),
            trace_origin=current_trace_origin(),
        )
        # What changed unasked is read in the same trip: every notice of this suspension names it.
        changes = self.approvals.changes.reader(state.session)
        pending = await self.approvals.pending_of(ctx.actor.key, changes)
        if pending >= self.approvals.max_pending:
            # Fail closed: a request nobody can see among the others is not asked, nor run.
            text = too_many(pending)
            await self.abandon(state, suspension, f"not executed: {text}")
            await state.emit(Reply(text))
            await self.audit.record(
                "approval_refused_too_many",
                ctx.actor.key,
                tool=call.name,
                pending=pending,
                session=state.session,
                conversation=ctx.conversation.id,
            )
            return result.model_copy(update={"stop_reason": StopReason.ERROR, "error": text})
        waiting = [(suspension.index, suspension.result), *suspension.more]
        ids = [new_approval_id() for _ in waiting]
        if len(waiting) > 1:  # one notice, one decision each, one resume for them all
            checkpoint = checkpoint.model_copy(update={"batch": ids})
        items = []
        for approval_id, (index, judged) in zip(ids, waiting, strict=True):
            copy = checkpoint.model_copy(update={"index": index})
            items.append((self._record(state, approval_id, copy, judged, changes.changed), copy))
        unsaved = [encode_message(m) for m in suspension.unsaved]
        try:
            timeout = ctx.policy.approval_timeout if ctx.policy else None
            records = await self.approvals.create(items, unsaved, timeout)
        except OUTAGES:
            # Redis unreachable (or restarted under a pooled connection): the job is tried
            # again, and its retake finds the request if it was stored after all. Telling the
            # chat "not executed" here would end the run and lose the user's message.
            raise
        except RedisError as exc:
            log.error(
                "session %s: could not store an approval request (Redis: %s)", state.session, exc
            )
            text = (
                f"Could not store the approval request for {call.name} (Redis unavailable); "
                "it was not executed."
            )
            await self.abandon(state, suspension, f"not executed: {text}")
            await state.emit(Reply(text))
            return result.model_copy(update={"stop_reason": StopReason.ERROR, "error": text})
        state.history.extend(suspension.unsaved)
        for record, (_, judged) in zip(records, waiting, strict=True):
            APPROVALS.labels("requested").inc()
            tracing.approval_paused(
                record.call_id, record.id, checkpoint.id, record.tool, record.reasons
            )
            await self.audit.record(
                "question_asked" if record.is_question else "approval_requested",
                ctx.actor.key,
                approval=record.id,
                batch=checkpoint.id if checkpoint.batch else None,
                tool=record.tool,
                session=record.session,
                conversation=ctx.conversation.id,
                requester=ctx.actor.key,
                reasons="; ".join(map(redact_text, record.reasons)),  # they may quote the call
                expires_at=record.expires_at,
                # What an "approve always" would grant: `clawgate approvals stats` groups by it.
                rule=None if record.is_question else audited_rule(record),
                always=None if record.is_question else record.always.value,
                # What asked: a built-in rule, the policy file, an override, the mode, a hook.
                policy_source=judged.policy.source if judged.policy else None,
            )
        await self.notify(records[0], batch=records, batch_id=checkpoint.id)
        return result.model_copy(update={"approval_id": records[0].id})

    def _record(
        self,
        state: RunState,
        approval_id: str,
        checkpoint: Checkpoint,
        judged: ToolResult,
        changed: Changed,
    ) -> ApprovalRecord:
        """The approval of the checkpoint's call (`checkpoint.index`), as the chain `judged`
        it (its reasons; an admin hook's quorum and routes)."""
        ctx = state.ctx
        assert ctx.actor is not None and ctx.conversation is not None
        call = checkpoint.calls[checkpoint.index]
        tool = self.registry.resolve(call.name) if self.registry else None
        arguments = canonical_arguments(call)
        return ApprovalRecord(
            id=approval_id,
            session=state.session,
            conversation=ctx.conversation,
            requester=ctx.actor,
            tool=call.name,
            arguments=arguments,
            call_id=call.id,
            call_hash=call_hash(call.name, arguments, call.id, state.session, checkpoint.id),
            reasons=judged.reasons,
            **(
                _question(call)
                if isinstance(tool, ClarifyTool)
                else self._approval(state, call, tool, judged, changed)
            ),
        )

    def _approval(
        self,
        state: RunState,
        call: ToolCall,
        tool: Tool[Any] | None,
        result: ToolResult,
        changed: Changed,
    ) -> Fields:
        """An approval record's own fields: who must approve, what an "always" covers, where
        else it is posted, what changed unasked since the last one. The suspended `result`
        may raise the quorum and add routes (an admin hook's ask)."""
        policy, reasons = state.ctx.policy, result.reasons
        assert state.ctx.actor is not None
        always, no_always = cover_of(call.name, tool, policy)
        return {
            "quorum": max(policy.quorum(call.name, reasons) if policy else 1, result.quorum),
            "signature": None if tool is None else tool.signature,
            "always": always,
            "no_always": no_always,
            "unapproved_changes": list(changed.paths),
            "unapproved_more": changed.more,
            "runs_with": None if tool is None else tool.approved_view(),
            "routes": _routes(policy, state.ctx.actor.key, result.routes),
            **_reminders(policy),
        }

    async def notify(
        self,
        record: ApprovalRecord,
        again: bool = False,
        batch: Sequence[ApprovalRecord] = (),
        batch_id: str = "",
    ) -> None:
        """Post the approval notice to its conversation and to the policy's approvers'
        channels, and record that (and where) it was posted. `again`: it may have been
        posted by a process that died before recording it. `batch`: the approvals of the
        record's batch (it leads): one notice shows them all."""
        notice = batch_notice(batch, batch_id) if len(batch) > 1 else notice_of(record)
        ref = await self.send(record.conversation, ApprovalRequested(notice, again))
        copies = []
        for target in record.routes:
            copy = await self.send(routed(target), ApprovalRequested(notice, again, copy=True))
            if copy:
                copies.append({"conversation": target, **copy})
        await self.approvals.set_notice(record, ref or {}, copies)

    async def abandon(self, state: RunState, suspension: Suspension, text: str) -> None:
        """Best effort after a failed checkpoint: keep what already ran in history, answer the
        rest of the batch as not executed, and stop waiting for the approval being resumed."""
        rest = suspension.calls[suspension.index :]
        messages = [*suspension.unsaved, *unanswered(rest, text, ToolStatus.ERROR)]
        try:
            if state.resumed_from is not None:
                encoded = [encode_message(m) for m in messages]
                await self.approvals.close(state.session, state.resumed_from, encoded)
            else:
                await self.history.append(state.session, *messages)
        except RedisError:
            log.warning("session %s: the interrupted turn could not be saved", state.session)
