"""Human decisions on approvals: who may decide, the atomic decision script, refusals said and
audited, "approve always" grants, and withdrawing a request (`/cancel`). What follows an
accepted decision (resuming the run) is the runtime's (runtime.agent)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from redis.exceptions import RedisError

from runtime.approval.always import rule_for_record
from runtime.approval.edit import CallEditor, Edited
from runtime.approval.grants import Grant, GrantTerms, describe_grant, scope_of
from runtime.approval.models import (
    AlwaysCover,
    ApprovalRecord,
    ApprovalStatus,
    Checkpoint,
    checkpoint_call_hash,
)
from runtime.approval.notices import (
    REFUSAL_KINDS,
    TRANSITION_MESSAGES,
    is_last,
    rejection,
    transition_message,
)
from runtime.approval.questions import answered, not_yours, resolve, who
from runtime.approval.settle import Settlement
from runtime.approval.store import ApprovalStore, Transition
from runtime.audit import AuditLog
from runtime.canonical import canonical_arguments
from runtime.metrics import APPROVALS, DECISION_SECONDS
from runtime.models import Actor, ConversationRef, RunResult, ToolResult, ToolStatus
from runtime.policy.approvers import OPERATOR_PLATFORM
from runtime.policy.resolve import EffectivePolicy
from runtime.policy.service import PolicyRead, PolicyService
from runtime.redact import redact_text
from runtime.store.history import Window, encode_message

log = logging.getLogger(__name__)
REDIS_DOWN = "cannot reach Redis, so nothing was decided and nothing was executed; try again"


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to a decision attempt: `accepted`, or refused with a message saying why."""

    accepted: bool
    message: str
    run: RunResult | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """A question's answer by its asker, as given (an option's number or text, or their own
    words): decided like an approval, it becomes the clarify call's result."""

    text: str


def refused(message: str) -> Decision:
    return Decision(False, message)


@dataclass(frozen=True, slots=True)
class Decided:
    """A recorded decision: the record, its checkpoint, the window of the session's history
    right after the decision, and for a rejection or an answer the result it recorded for
    the call."""

    record: ApprovalRecord
    checkpoint: Checkpoint
    window: Window
    result: ToolResult | None
    held: int  # messages held when a rejection released the session
    # The conversation's policy read for the decision, and when: the resumed run uses it.
    policy: EffectivePolicy
    policy_read_at: float
    claim: str = ""  # an item of a batch: whether this decision claimed its resume (Transition)


@dataclass(frozen=True, slots=True)
class Batch:
    """The id decided is a batch's: its approvals, in the model's order, are decided one by
    one (those the decider may decide)."""

    items: list[str]


@dataclass(frozen=True, slots=True)
class Retaken:
    """The deciding job was delivered again after its process died: its decision stands
    (recorded before), and the run it resumed is to be continued from what was recorded."""

    record: ApprovalRecord
    checkpoint: Checkpoint


def routed_to(record: ApprovalRecord, conversation: ConversationRef, actor: Actor) -> bool:
    """Whether a decision from `conversation` by `actor` comes from a copy of the request: a
    conversation the policy sent it to, or anywhere for a person it was sent to directly."""
    return conversation.id in record.routes or actor.key in record.routes


async def audit_refusal(
    audit: AuditLog,
    approval_id: str,
    actor: Actor,
    why: str,
    message: str,
    record: ApprovalRecord | None = None,
    attempt: str | None = None,
    trace: str | None = None,
) -> None:
    """A refused decision or withdrawal, in the global trail: who, what they tried, why
    (`unauthorized`, `wrong_conversation`, `expired`, `unknown_id`, `already_decided`,
    `hash_mismatch`)."""
    await audit.record(
        "approval_refused",
        actor.key,
        approval=approval_id,
        attempt=attempt,
        why=why,
        message=message,
        tool=record.tool if record else None,
        session=record.session if record else None,
        conversation=record.conversation.id if record else None,
        trace=trace,  # the trace of the run that asked (a refusal happens outside any run)
    )


def checkpoint_hash(checkpoint: Checkpoint) -> str:
    """The hash of the checkpoint's suspended call as it stands now."""
    return checkpoint_call_hash(checkpoint, canonical_arguments(checkpoint.calls[checkpoint.index]))


def decider_refusal(policy: EffectivePolicy, actor: Actor, record: ApprovalRecord) -> str | None:
    """Why `actor` may not decide `record` under `policy` (None if they may)."""
    if record.is_question:
        mine = actor.key == record.requester.key
        return None if mine else "only the person who asked may answer it"
    refusal = policy.approver_policy().refusal(actor, record)
    escalated = record.escalated and actor.key in record.escalate_to
    if refusal is not None and escalated and actor.key != record.requester.key:
        return None  # the second group the request was escalated to
    return refusal


class Decisions:
    def __init__(
        self,
        approvals: ApprovalStore,
        policies: PolicyService,
        audit: AuditLog,
        settlement: Settlement,
        worker_id: str,
        liveness_ttl: float,
        editor: CallEditor | None = None,
    ) -> None:
        """`worker_id` and `liveness_ttl`: the deciding process, which owns an approved call
        until it is consumed (see ApprovalStore.decide)."""
        self.approvals = approvals
        self.policies = policies
        self.audit = audit
        self.settlement = settlement
        self.worker_id = worker_id
        self.liveness_ttl = liveness_ttl
        self.editor = editor  # approve with edit; None: edits are refused

    async def refusal(
        self, actor: Actor, record: ApprovalRecord, read: PolicyRead | None = None
    ) -> tuple[str | None, EffectivePolicy]:
        """Why `actor` may not decide `record` under its conversation's policy (None if they
        may), and that policy (`read` with the record, when it is that conversation's). A
        question: only the requester answers it."""
        if read is not None and read.at and read.conversation_id == record.conversation.id:
            policy = read.policy()
        else:
            policy = await self.policies.effective(record.conversation.id)
        return decider_refusal(policy, actor, record), policy

    async def record(
        self,
        approval_id: str,
        decision: bool | Answer,
        actor: Actor,
        conversation: ConversationRef | None,
        reason: str | None,
        always: GrantTerms | None,
        job: str = "",
        edit: str | None = None,
    ) -> Decision | Decided | Retaken | Batch:
        """Check who may decide, then run the decision script: a refusal, what was decided
        (audited), or for a retake of `job` (the deciding job) its earlier decision. `edit`:
        the call's arguments as the approver changed them (JSON), approved as edited.
        `decision`: approve (True), reject, or a question's `Answer`."""
        answer = decision.text if isinstance(decision, Answer) else None
        approve = decision is True
        attempt = "answer" if answer is not None else "approve" if approve else "reject"
        # The policy of where it was decided, read with the record: that is the approval's
        # own conversation but for a copy of its notice posted elsewhere.
        read = None if conversation is None else await self.policies.read(conversation.id)
        loaded = await self.approvals.load(approval_id.strip().lower(), read)
        if loaded is None:
            attempt = attempt if edit is None else "edit"
            return await self._batch_or_unknown(approval_id, actor, attempt)
        record, checkpoint = loaded
        if conversation is not None and routed_to(record, conversation, actor):
            conversation = record.conversation  # a copy of the notice: as good as the thread
        refusal, policy = await self.refusal(actor, record, read)
        policy_read_at = time.monotonic()
        if refusal is None and conversation is None and actor.platform != OPERATOR_PLATFORM:
            refusal = "decisions must come from the conversation that requested them"
        if refusal is None and approve and record.quorum > 1 and actor.key == record.requester.key:
            refusal = f"it needs {record.quorum} approvers besides the one who asked for it"
        if refusal is not None:
            return refused(
                await self.unauthorized(record, actor, refusal, attempt, checkpoint.trace_id)
            )
        if record.is_question or answer is not None:
            answer, why = await self._answer(record, actor, answer, attempt, checkpoint)
            if answer is None:
                return refused(why)
        # Only a pending call is edited: anything else is refused by DECIDE as decided, or,
        # for this job delivered again, retaken with the edit it recorded.
        if edit is not None and approve and record.status is ApprovalStatus.PENDING:
            edited = await self._edit(record, checkpoint, edit, actor, policy)
            if isinstance(edited, Decision):
                return edited
            record, checkpoint = edited.record, edited.checkpoint
        call = checkpoint.calls[checkpoint.index]
        # A question's result holds the answer; people see it redacted.
        rejected = None if approve else rejection(call, actor.key, reason)
        recorded = rejected if answer is None else answered(call, answer)
        reason = reason if answer is None else redact_text(answer)
        transition, window = await self.approvals.decide(
            record,
            approve,
            actor.key,
            reason or "",
            None if conversation is None else conversation.id,
            checkpoint_hash(checkpoint),
            self.worker_id,
            self.liveness_ttl,
            rejection=encode_message(recorded.to_message()) if recorded else "",
            last=is_last(checkpoint),
            job=job,
            window=True,
            answer=answer,
            batch=checkpoint.batch,
            seen_changes=not record.is_question,
        )
        if transition.outcome == "retaken":
            return Retaken(record, checkpoint)
        if transition.outcome in ("partial", "counted"):
            return await self.counted(record, checkpoint, actor, transition)
        if not transition.ok:
            return refused(
                await self.transition_refused(record, checkpoint, transition, actor, attempt)
            )
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.REJECTED
        status = status if answer is None else ApprovalStatus.ANSWERED
        APPROVALS.labels(status.value).inc()
        DECISION_SECONDS.observe(max(0.0, time.time() - record.created_at / 1000))
        decided = record.model_copy(
            update={"status": status, "decided_by": actor.key, "reason": reason, "answer": answer}
        )
        await self._audit_decided(decided, checkpoint, actor, always)
        assert window is not None  # read for every decision made
        return Decided(
            decided,
            checkpoint,
            window,
            recorded,
            transition.held,
            policy,
            policy_read_at,
            transition.claim,
        )

    async def _batch_or_unknown(
        self, approval_id: str, actor: Actor, attempt: str
    ) -> Decision | Batch:
        """A batch's id (its approvals are decided one by one), or an id nobody knows."""
        items = await self.approvals.batch_items(approval_id)
        if items is not None and attempt not in ("answer", "edit"):
            return Batch(items)
        message = f"unknown approval id {approval_id!r}"
        if items is not None:  # one call of it is answered or edited by its own id
            message = f"{approval_id} is a batch: {attempt} one of its calls by that call's id"
        await audit_refusal(self.audit, approval_id, actor, "unknown_id", message, attempt=attempt)
        return refused(message)

    async def _audit_decided(
        self,
        record: ApprovalRecord,
        checkpoint: Checkpoint,
        actor: Actor,
        always: GrantTerms | None,
    ) -> None:
        """A decision made, in the global trail (a question's answer redacted, as its
        `reason`)."""
        where = {
            "approval": record.id,
            "tool": record.tool,
            "session": record.session,
            "conversation": record.conversation.id,
            "trace": checkpoint.trace_id,
        }
        if record.is_question:
            await self.audit.record("question_answered", actor.key, answer=record.reason, **where)
            return
        approve = record.status is ApprovalStatus.APPROVED
        granting = always is not None and record.always is not AlwaysCover.NEVER
        await self.audit.record(
            "approval_decided",
            actor.key,
            decision=record.status.value,
            scope=("always" if granting else "once") if approve else None,
            grant=always.scope if approve and granting and always else None,
            reason=record.reason,
            **where,
        )

    async def _answer(
        self,
        record: ApprovalRecord,
        actor: Actor,
        text: str | None,
        attempt: str,
        checkpoint: Checkpoint,
    ) -> tuple[str | None, str]:
        """(the answer, "") that `text` gives a question, or (None, why not): an answer to an
        approval, an approval or rejection of a question, or no option chosen."""
        if record.is_question and text is not None:
            return resolve(record, text)
        if record.is_question:
            message = (
                f"{record.id} is a question to {who(record)}: answer it with "
                f"/answer {record.id} <number or words> (or /cancel it)."
            )
        else:
            message = f"{record.id} is an approval, not a question: /approve or /reject it."
        await audit_refusal(
            self.audit,
            record.id,
            actor,
            "wrong_kind",
            message,
            record,
            attempt,
            checkpoint.trace_id,
        )
        return None, message

    async def _edit(
        self,
        record: ApprovalRecord,
        checkpoint: Checkpoint,
        arguments: str,
        actor: Actor,
        policy: EffectivePolicy,
    ) -> Edited | Decision:
        """The call edited as `actor` asks (recorded and audited), or the refusal."""
        if self.editor is None:
            return refused("approving with edits is not possible here")
        try:
            edited = await self.editor.edit(record, checkpoint, arguments, actor, policy)
        except RedisError:
            raise  # the job is tried again
        except Exception as exc:
            # Whatever the edit was, the approver hears that it failed and the call stays
            # pending as it was (never a decision job that dies without a word).
            log.exception("approval %s: the edit failed", record.id)
            edited = f"it could not be applied ({type(exc).__name__}); nothing was changed"
        if isinstance(edited, str):
            message = f"Approval {record.id} not edited: {edited}."
            await audit_refusal(
                self.audit,
                record.id,
                actor,
                "edit_refused",
                message,
                record,
                "edit",
                checkpoint.trace_id,
            )
            return refused(message)
        await self.audit.record(
            "approval_edited",
            actor.key,
            approval=record.id,
            tool=record.tool,
            diff=edited.diff,
            session=record.session,
            conversation=record.conversation.id,
            trace=checkpoint.trace_id,
        )
        return edited

    async def counted(
        self,
        record: ApprovalRecord,
        checkpoint: Checkpoint,
        actor: Actor,
        transition: Transition,
    ) -> Decision:
        """An approval toward the N-person rule: counted (the notice shows how many so far),
        or this approver's second, which does not count."""
        if transition.outcome == "counted":
            return refused(
                f"you approved {record.id} already; it needs another approver, not you again"
            )
        approved_by = [*record.approved_by, actor.key]
        counted = record.model_copy(update={"approved_by": approved_by})
        await self.settlement.update_notice(counted, checkpoint)
        await self.audit.record(
            "approval_counted",
            actor.key,
            approval=record.id,
            approvals=transition.approvals,
            needed=transition.needed,
            tool=record.tool,
            session=record.session,
            conversation=record.conversation.id,
        )
        more = transition.needed - transition.approvals
        return Decision(
            True,
            f"Approval {record.id}: {transition.approvals} of {transition.needed} approvals; "
            f"{more} more approver{'s' if more > 1 else ''} needed.",
        )

    async def announce(self, decided: Decided, actor: Actor, always: GrantTerms | None) -> str:
        """Update the notice in place and, for "approve always", add the grant; returns what
        to add to the decider's answer."""
        record = decided.record
        await self.settlement.update_notice(record, decided.checkpoint)
        if always is None or record.status is not ApprovalStatus.APPROVED:
            return ""
        return await self.grant(record, actor, decided.policy, always, decided.checkpoint.trace_id)

    async def precheck(
        self, approval_id: str, actor: Actor, conversation: ConversationRef
    ) -> tuple[str | None, str | None]:
        """(why `actor` cannot decide it here or None, the approval's session or None): for
        platforms that must answer a click at once. Advisory: `record` checks everything
        again atomically, so a click that passes here can still be refused there. A batch's
        id: where it may be decided (each item is checked when decided)."""
        loaded = await self.approvals.load(approval_id.strip().lower())
        items = await self.approvals.batch_items(approval_id) if loaded is None else None
        if items:
            lead = await self.approvals.load(items[0])
            record = lead[0] if lead is not None else None
            if record is not None and (
                record.conversation.id == conversation.id or routed_to(record, conversation, actor)
            ):
                return None, record.session
        if loaded is None:
            message = f"unknown approval id {approval_id!r}"
            await audit_refusal(self.audit, approval_id, actor, "unknown_id", message)
            return message, None
        record, checkpoint = loaded
        refusal, _ = await self.refusal(actor, record)
        if refusal is not None:
            message = await self.unauthorized(record, actor, refusal, None, checkpoint.trace_id)
            return message, record.session
        why = None
        if record.conversation.id != conversation.id and not routed_to(record, conversation, actor):
            why = "wrong_conversation"
            message = TRANSITION_MESSAGES["wrong_conversation"].format(
                id=record.id, noun=record.kind.value
            )
        elif record.status is not ApprovalStatus.PENDING:
            why = "already_decided"
            status = record.status.value.replace("_", " ")
            by = f" by {record.decided_by}" if record.decided_by else ""
            message = f"{record.kind.value} {record.id} was already {status}{by}"
        if why is None:
            return None, record.session
        await audit_refusal(
            self.audit, record.id, actor, why, message, record, trace=checkpoint.trace_id
        )
        return message, record.session

    async def withdraw(
        self,
        record: ApprovalRecord,
        checkpoint: Checkpoint,
        actor: Actor,
        conversation: ConversationRef,
    ) -> tuple[str, bool]:
        """`/cancel` of a pending request, by its requester or someone who may decide it:
        what to say, and whether it was withdrawn (its batch is then closed in history)."""
        if actor.key != record.requester.key:
            refusal, _ = await self.refusal(actor, record)
            if refusal is not None:
                message = await self.unauthorized(
                    record, actor, refusal, "cancel", checkpoint.trace_id
                )
                return message, False
        reason = f"cancelled by {actor.key}"
        if checkpoint.batch:
            claim = await self.approvals.claim(record, checkpoint, f"cancel-{actor.key}", True)
            if claim != "claimed":  # its resume is under way: /cancel stops the running request
                return f"Batch {checkpoint.id} is being carried out already.", False
            items = await self.approvals.load_batch(checkpoint)
        else:
            items = [(record, checkpoint)]
        cancelled = []
        for item, copy in items:
            transition = await self._cancel(item, copy, actor, reason, conversation)
            if not transition.ok and len(items) == 1:
                message = await self.transition_refused(item, copy, transition, actor, "cancel")
                return message, False
            if transition.ok:
                update = {"status": ApprovalStatus.REJECTED, "decided_by": actor.key}
                cancelled.append(item.model_copy(update={**update, "reason": reason}))
        APPROVALS.labels("cancelled").inc(len(cancelled))
        settle = self.settlement
        for item in cancelled:
            await self.audit.record(
                "approval_cancelled",
                actor.key,
                approval=item.id,
                tool=item.tool,
                session=item.session,
                conversation=item.conversation.id,
                trace=checkpoint.trace_id,
            )
            await settle.trace_ending(
                "approval.cancelled", item, checkpoint, cancelled_by=actor.key
            )
        await settle.update_notice(cancelled[0] if cancelled else record, checkpoint)
        await settle.close_batch(
            record, checkpoint, f"not executed: {reason}", ToolStatus.CANCELLED
        )
        if checkpoint.batch:
            return f"Batch {checkpoint.id} withdrawn; none of its calls was executed.", True
        if record.is_question:
            return f"Question {record.id} withdrawn; the model is told it was not answered.", True
        return f"Approval {record.id} withdrawn; the call was not executed.", True

    async def _cancel(
        self,
        record: ApprovalRecord,
        checkpoint: Checkpoint,
        actor: Actor,
        reason: str,
        conversation: ConversationRef,
    ) -> Transition:
        """Reject a pending approval as withdrawn; an approved item of a batch (its resume
        never began: the withdrawal claimed it) is rejected too."""
        if record.status is ApprovalStatus.APPROVED and checkpoint.batch:
            return await self.approvals.move(
                record,
                ApprovalStatus.APPROVED,
                ApprovalStatus.REJECTED,
                actor.key,
                fields={"reason": reason, "decided_by": actor.key},
            )
        transition, _ = await self.approvals.decide(
            record,
            False,
            actor.key,
            reason,
            conversation.id,
            checkpoint_hash(checkpoint),
            self.worker_id,
            self.liveness_ttl,
            batch=checkpoint.batch,
        )
        return transition

    async def unauthorized(
        self,
        record: ApprovalRecord,
        actor: Actor,
        refusal: str,
        attempt: str | None,
        trace: str | None,
    ) -> str:
        """`actor` may not decide (or withdraw) `record`: recorded in its session's stream and
        the global trail; returns what to tell them."""
        await self.approvals.audit(record.session, "refused", record.id, actor.key, refusal)
        APPROVALS.labels("refused").inc()
        verb = "cancel" if attempt == "cancel" else "decide"
        message = f"You cannot {verb} approval {record.id}: {refusal}."
        if record.is_question:
            message = not_yours(record)
        await audit_refusal(
            self.audit, record.id, actor, "unauthorized", message, record, attempt, trace
        )
        return message

    async def transition_refused(
        self,
        record: ApprovalRecord,
        checkpoint: Checkpoint,
        transition: Transition,
        actor: Actor,
        attempt: str | None,
    ) -> str:
        """The status script refused (expired, already decided, wrong conversation, hash):
        an expiry found this way is settled now; returns what to tell `actor`."""
        if transition.outcome == "expired":
            await self.settlement.after_expiry(record, checkpoint)
        APPROVALS.labels("refused").inc()
        message = transition_message(record.id, transition, record.kind.value)
        why = REFUSAL_KINDS.get(transition.outcome, transition.outcome)
        await audit_refusal(
            self.audit, record.id, actor, why, message, record, attempt, checkpoint.trace_id
        )
        return message

    async def grant(
        self,
        record: ApprovalRecord,
        actor: Actor,
        policy: EffectivePolicy,
        terms: GrantTerms,
        trace: str | None = None,
    ) -> str:
        """The grant of an "approve always" (`policy`: the conversation's, as read for the
        decision); returns what to tell the decider."""
        if record.always is AlwaysCover.NEVER:
            return f" No grant was added ({record.no_always}): it was approved once only."
        rule = rule_for_record(record, json.loads(record.arguments))
        if rule is None:
            return (
                " No grant was added: chains, redirections and substitutions are approved once "
                "only."
            )
        if policy.verdict(record.tool).state == "ask":
            return f" No grant was added: the policy says {record.tool} always asks here."
        if terms.scope == "everywhere" and not policy.approver_policy().is_admin(actor):
            return " No grant was added: only admins may grant everywhere."
        now = int(time.time() * 1000)
        grant = Grant(
            scope=scope_of(terms, record.conversation.id, record.session),
            rule=rule,
            reasons=record.reasons,
            by=actor.key,
            at=now,
            expires_at=None if terms.seconds is None else now + int(terms.seconds * 1000),
            approval=record.id,
            conversation=record.conversation.id,
        )
        await self.approvals.grants.add(grant)
        await self.audit.record(
            "grant_added",
            actor.key,
            approval=record.id,
            grant=grant.id,
            scope=grant.scope,
            expires_at=grant.expires_at,
            tool=record.tool,
            rule=redact_text(grant.shown),
            reasons="; ".join(map(redact_text, record.reasons)),  # they may quote the call
            session=record.session,
            conversation=record.conversation.id,
            trace=trace,
        )
        return f" {describe_grant(grant)} (revoke: /policy revoke {grant.id})."
