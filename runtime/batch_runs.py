"""The runtime's side of batches (runtime/batch_resume.py carries one out): a decision on an
item, `/approve <batch>` deciding every item its decider may, and the run that carries a
batch out once the decision (or the expiry) that left none pending claimed it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from runtime.approval.decisions import Answer, Batch, Decided, Decision, Decisions
from runtime.approval.grants import GrantTerms
from runtime.approval.models import ApprovalRecord, ApprovalStatus, Checkpoint
from runtime.batch_resume import BatchResume
from runtime.executor import Emit
from runtime.loop import RunState, Suspension
from runtime.models import Actor, ConversationRef, RunResult
from runtime.policy.resolve import EffectivePolicy
from runtime.store.history import Window
from runtime.store.runs import RunJournal
from runtime.tools.base import ToolContext
from runtime.tracing.recorder import Tracer

LoopWork = Coroutine[Any, Any, tuple[RunResult, Suspension | None]]
Drive = Callable[[RunState, LoopWork], Awaitable[RunResult]]
Contexts = Callable[[str, Actor, ConversationRef], ToolContext]
Emitters = Callable[[ConversationRef], Emit]
ReleaseHeld = Callable[[str], Awaitable[RunResult | None]]
# What was asked: approve (or an answer), by whom, where, why, with what grant, in which job.
Asked = tuple[bool | Answer, Actor, ConversationRef | None, str | None, GrantTerms | None, str]
# Told of a decision as recorded, with what its announcement adds.
Recorded = Callable[[ApprovalRecord, str], Awaitable[None]]
DecideOne = Callable[
    [
        str,
        bool,
        Actor,
        ConversationRef | None,
        str | None,
        GrantTerms | None,
        str,
        str | None,
        Recorded | None,
    ],
    Awaitable[Decision],
]


class BatchRuns:
    def __init__(
        self,
        decisions: Decisions,
        runs: RunJournal,
        tracer: Tracer,
        resume: BatchResume,
        runtime: tuple[Contexts, Emitters, Drive, ReleaseHeld],
    ) -> None:
        """`runtime`: how the runtime makes a run's context and emitter, drives a run to its
        end, and lets a session's held messages run."""
        self.approvals = decisions.approvals
        self.decisions = decisions
        self.runs = runs
        self.tracer = tracer
        self.resume = resume
        self.context, self.emitter, self.drive, self.release_held = runtime

    async def decided(
        self,
        decided: Decided | Batch,
        asked: Asked,
        decide: DecideOne,
        recorded: Recorded | None = None,
    ) -> Decision:
        """A decision recorded on an item of a batch (`decide` made it, as `asked`), or on a
        batch's own id (its items are decided with `decide`, see `decide_all`). `recorded`:
        told of each decision as recorded (a decider waiting elsewhere)."""
        if isinstance(decided, Batch):
            return await self.decide_all(decided, asked, decide, recorded)
        _, actor, _, _, always, job = asked
        note = await self.decisions.announce(decided, actor, always)
        if recorded is not None:
            await recorded(decided.record, note)
        return await self.item_decided(decided, note, job)

    async def item_decided(self, decided: Decided, note: str, job: str) -> Decision:
        """An item of a batch decided (`note`: what its announcement adds): the batch is
        carried out here when this decision claimed it (none is pending any more), else once
        the last one is decided."""
        record, checkpoint = decided.record, decided.checkpoint
        verb = "approved" if record.status is ApprovalStatus.APPROVED else "rejected"
        said = f"Approval {record.id} {verb}.{note}"
        if decided.claim == "open":
            waits = f" The run goes on once every call of batch {checkpoint.id} is decided."
            return Decision(True, said + waits)
        if decided.claim != "claimed":  # another carries it out
            return Decision(True, said)
        policy = (decided.policy, decided.policy_read_at)
        result = await self.carry_out(checkpoint, decided.window, job, policy)
        return Decision(True, f"{said} Batch {checkpoint.id} is decided: carried out.", result)

    async def decide_all(
        self, batch: Batch, asked: Asked, decide: DecideOne, recorded: Recorded | None = None
    ) -> Decision:
        """`/approve <batch> [always …]` or `/reject <batch>`: each pending item the decider
        may decide, in the model's order, with `decide`; the others are named, not refused
        one by one."""
        approve, actor, conversation, reason, always, job = asked
        if isinstance(approve, Answer):
            return Decision(False, "a batch holds approvals, not questions")
        done: list[str] = []
        counted: list[str] = []
        skipped: list[str] = []
        result = None
        for approval_id in batch.items:
            loaded = await self.approvals.load(approval_id)
            if loaded is None or loaded[0].status is not ApprovalStatus.PENDING:
                continue
            refusal, _ = await self.decisions.refusal(actor, loaded[0])
            if refusal is None:
                decision = await decide(
                    approval_id, approve, actor, conversation, reason, always, job, None, recorded
                )
                refusal = None if decision.accepted else decision.message
                result = decision.run or result
            if refusal is not None:
                skipped.append(f"{approval_id} ({refusal})")
            elif decision.message.endswith("needed."):  # counted toward its quorum
                counted.append(decision.message.removeprefix("Approval "))
            else:
                done.append(approval_id)
        verb = "approved" if approve else "rejected"
        said = f"{verb.capitalize()}: {', '.join(done)}." if done else f"Nothing {verb}."
        said += "".join(f" Counted: {c}" for c in counted)
        if skipped:
            said += f" Not decided by you: {'; '.join(skipped)}."
        return Decision(bool(done or counted), said, result)

    async def carry_out(
        self,
        checkpoint: Checkpoint,
        window: Window,
        job: str,
        policy: tuple[EffectivePolicy | None, float] = (None, 0.0),
        retaken: bool = False,
    ) -> RunResult:
        """Carry out a batch whose resume `job` claimed, then the messages held meanwhile.
        `policy`: the conversation's as read for the deciding, and when (None: read anew);
        `retaken`: `job` died carrying it out (see BatchResume)."""
        session = checkpoint.session
        state = self.resumed(checkpoint, window, checkpoint.batch[0], policy)
        async with self.tracer.trace(  # drawn under the pause of the batch's lead
            "approval.resume",
            session=session,
            resumes=checkpoint.trace_id,
            origin=checkpoint.trace_origin,
            approval_id=checkpoint.batch[0],
            batch=checkpoint.id,
            conversation=state.ctx.conversation.id if state.ctx.conversation else None,
        ) as trace:
            work = self.resume(state, checkpoint, retaken)
            result = trace.done(await self.drive(state, work))
        await self.runs.finish(session, job)
        await self.release_held(session)
        return result

    def resumed(
        self,
        checkpoint: Checkpoint,
        window: Window,
        approval_id: str,
        policy: tuple[EffectivePolicy | None, float] = (None, 0.0),
    ) -> RunState:
        """The state of a run resumed from `checkpoint` after a decision on `approval_id` (a
        batch's: its lead), on `window`; `policy` as in `carry_out`."""
        ctx = self.context(checkpoint.session, checkpoint.actor, checkpoint.conversation)
        ctx.policy, read_at = policy
        return RunState.of(
            window,
            checkpoint.session,
            ctx,
            self.emitter(checkpoint.conversation),
            step=checkpoint.step,
            resumed_from=approval_id,
            policy_read_at=read_at,
        )

    async def expired(self, session: str) -> None:
        """A batch whose last open item expired (the sweeper's, or found by a decision) is
        carried out by whoever lets the session's held messages go next: in a server, a job
        of the session's lane, which a worker takes over (and this goes on) if its process
        dies."""
        lead = await self.approvals.pending_id(session)
        loaded = None if lead is None else await self.approvals.load(lead)
        if loaded is None or not loaded[1].batch:
            return
        job = f"expired-{loaded[1].id}"
        claim = await self.approvals.claim(*loaded, job)
        if claim not in ("claimed", "again"):
            return
        entry = await self.runs.latest(session)
        if entry.job == job and not entry.done:
            await self.carry_out(loaded[1], entry.window, job, retaken=claim == "again")
