"""The runtime's public API, used by every adapter:

- `run(session, text, actor, conversation, job)`: one message; held while the session waits
  for a decision, else it runs the agent loop (the same job again continues it: retake.py).
- `decide(approval_id, approve, actor, conversation, ...)`: a human's answer; on approve the
  frozen call runs exactly once and the run continues from its checkpoint, in any process.
- `cancel`, `pending`, `sweep` (expiry and crash recovery)."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from typing import Any

from runtime.approval.decisions import Answer, Batch, Decided, Decision, Retaken
from runtime.approval.grants import GrantTerms
from runtime.approval.models import ApprovalRecord, ApprovalStatus, HeldMessage
from runtime.approval.notices import is_last
from runtime.approval.store import ApprovalStore
from runtime.approval.wing import ApprovalWing
from runtime.audit import AuditLog
from runtime.batch_resume import BatchResume
from runtime.batch_runs import BatchRuns, Recorded
from runtime.channel import ApprovalNotice, Channel, Event, Notice, RedactingChannel, RunFinished
from runtime.context.compactor import compacting
from runtime.executor import Emit
from runtime.loop import AgentLoop, RunState, Suspension, fingerprint
from runtime.metrics import RUNS
from runtime.middleware.chain import Middleware
from runtime.middleware.default import default_chain
from runtime.models import Actor, ConversationRef, RunResult, StopReason
from runtime.policy.service import PolicyRead, PolicyService
from runtime.providers.base import Provider, ProviderFactory
from runtime.queue.steering import Steering
from runtime.retake import Retake
from runtime.runtime_config import RuntimeConfig
from runtime.store import closing
from runtime.store.history import HistoryStore, encode_message
from runtime.store.runs import Entry, RunJournal, held_job, new_job
from runtime.tools.base import ToolContext
from runtime.tools.registry import ToolRegistry
from runtime.tracing import hooks as tracing
from runtime.tracing.recorder import Tracer
from runtime.web_access import WebAccess

log = logging.getLogger(__name__)
DEMO_NOTICE = (
    "Using the offline demo model (no OPENAI_API_KEY or OPENAI_BASE_URL). "
    "Try: read README.md, run: ls, write notes.txt: hello"
)
WAITING = "Waiting for a decision on approval {id}; your message will run after it."
LoopWork = Coroutine[Any, Any, tuple[RunResult, Suspension | None]]
Release = Callable[[str, ConversationRef], Awaitable[None]]


class Runtime:
    def __init__(
        self,
        config: RuntimeConfig,
        provider: Provider,
        registry: ToolRegistry,
        history: HistoryStore,
        channel: Channel,
        approvals: ApprovalStore,
        policies: PolicyService,
        release: Release | None = None,
        audit: AuditLog | None = None,
        tracer: Tracer | None = None,
        middlewares: Sequence[Middleware] | None = None,
        steering: Steering | None = None,
        models: ProviderFactory | None = None,
    ) -> None:
        """`release` runs the messages a session held once its wait ended outside a run (an expiry,
        a crashed execution): None runs them right here (a single-process chat); a server queues
        them in the session's lane instead, so they never run beside it. `audit` is the global
        audit trail (default: on the approvals' Redis and prefix); `middlewares` the chain of every
        tool call (default: runtime.middleware.default_chain). `steering`: the requester's messages
        join their running run (None: they queue); `models`: see AgentLoop."""
        self.config = config
        self.steering = steering
        self.release = release
        self.provider = provider
        self.registry = registry
        self.history = history
        self.channel = channel = RedactingChannel(channel)  # every event redacted, on any platform
        self.approvals = approvals
        self.audit = audit or AuditLog(approvals.redis, approvals.keys)
        self.policies = policies
        self.tracer = tracer or Tracer()  # default: off
        self.runs = RunJournal(approvals.redis, approvals.keys, approvals.ttl_ms)
        self.loop = AgentLoop(
            provider,
            registry,
            history,
            config.system_prompt,
            config.max_steps,
            config.max_tool_result_chars,
            audit=self.audit,
            policies=policies,
            middlewares=default_chain(policies, approvals) if middlewares is None else middlewares,
            context=compacting(provider, history, config.context_budget, self.audit),
            models=models,
            journal=self.runs,
            options=config.loop,
        )
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._cancels: dict[str, asyncio.Event] = {}
        self.wing = wing = ApprovalWing(
            approvals,
            self.audit,
            policies,
            self.tracer,
            channel.send,
            self._release_later,
            history,
            registry,
            config.workdir,
            self.worker_id,
            config.liveness_ttl,
        )
        self.settlement, self.decisions = wing.settlement, wing.decisions
        self.suspender, self.approved_calls = wing.suspender, wing.approved_calls
        resume = BatchResume(self.loop, history, wing.approved_calls, wing.settlement)
        runtime = (self._context, self._emitter, self._drive, self.release_held)
        self.batch_runs = BatchRuns(wing.decisions, self.runs, self.tracer, resume, runtime)
        self.retake = Retake(self.loop, wing, resume)
        self.sign_in: WebAccess | None = None  # the web console's links; None: it is off

    def _emitter(self, conversation: ConversationRef) -> Emit:
        async def emit(event: Event) -> None:
            await self.channel.send(conversation, event)

        return emit

    # --- messages ---------------------------------------------------------------------------

    async def run(
        self,
        session: str,
        text: str,
        actor: Actor,
        conversation: ConversationRef,
        job: str = "",
        images: tuple[str, ...] = (),
        ask: bool = False,
    ) -> RunResult:
        """Handle one message as the run of `job`, its inbox entry: a delivery of the same job
        again (its process died) continues the run from what was recorded. Redis failing is
        raised, never half-handled: the worker keeps the job and tries again. `images`: the
        person's attached images, paths in the work dir (`UserMessage.images`). `ask`: while
        the session waits for a decision, do nothing but say so (`RunResult.asked`): the
        message may answer a question (the caller looks, and runs it again if it does not)."""
        # The run's records in as few round trips as may be.
        async with self.audit.unit(), closing.joined(self.history.redis):
            job = job or new_job()
            held = HeldMessage(
                text=text, actor=actor, conversation=conversation, job=job, images=images
            )
            user = encode_message(held.user_message())
            policy = await self.policies.read(conversation.id)  # read with the entry
            entry = await self.runs.enter(session, held.model_dump_json(), user, job, policy, ask)
            if entry.state not in ("held", "asked"):
                return await self._run_entry(session, held, entry, policy=policy)
            waiting = RunResult(
                session=session,
                stop_reason=StopReason.APPROVAL_REQUIRED,
                steps=0,
                approval_id=entry.waiting_for or None,
                held=entry.state == "held",
                asked=entry.state == "asked",
            )
            if waiting.asked:
                return waiting
            if not entry.waiting_for:
                # Leftovers of an interrupted wait: they run first, in arrival order, then
                # this one (unless the session started waiting again: then all of them wait).
                return await self.release_held(session) or waiting
            if entry.position == 1:  # tell the sender once per wait, not for every message
                await self._emitter(conversation)(Notice(WAITING.format(id=entry.waiting_for)))
            return waiting

    async def _run_entry(
        self,
        session: str,
        message: HeldMessage,
        entry: Entry,
        held: str = "",
        policy: PolicyRead | None = None,
    ) -> RunResult:
        """Run a message that entered (`entry`): a new run, or a retake continued from what
        was recorded. `held`: the held message it came from, which leaves its list at the end.
        `policy`: the conversation's, read with the entry (no read of its own at step one)."""
        emit = self._emitter(message.conversation)
        if entry.state == "again" and entry.done:
            await self.runs.finish(session, message.job, held)
            return RunResult(session=session, stop_reason=StopReason.FINAL, steps=0)
        if self.provider.offline_demo and entry.window.end == 1:
            await emit(Notice(DEMO_NOTICE))
        ctx = self._context(session, message.actor, message.conversation, entry.state == "again")
        state = RunState.of(entry.window, session, ctx, emit)
        if policy is not None:
            ctx.policy, state.policy_read_at = policy.policy(), policy.at
        if self.steering is not None and not held:  # a held message's job left its lane
            state.steer = self.steering.port(self.runs, session, message.job, message.actor)
        work = self.retake(state, entry.start) if entry.state == "again" else self.loop.run(state)
        async with self.tracer.trace(
            "agent.run",
            session=session,
            actor=message.actor.key,
            conversation=message.conversation.id,  # whose overseers may read it (the console)
            payloads={"input": message.text},
        ) as trace:
            result = trace.done(await self._drive(state, work))
        await self.runs.finish(session, message.job, held)
        return result

    def _context(
        self, session: str, actor: Actor, conversation: ConversationRef, retaken: bool = False
    ) -> ToolContext:
        post = partial(self.channel.send, conversation)
        return ToolContext(
            session, self.config.workdir, actor, conversation, post=post, retaken=retaken
        )

    async def _drive(self, state: RunState, work: LoopWork) -> RunResult:
        """Await the loop (or a resumed batch), checkpoint a suspension, report the end."""
        self._cancels[state.session] = state.ctx.cancelled
        try:
            result, suspension = await work
            if suspension is not None:
                result = await self.suspender.suspend(state, suspension, result)
        except asyncio.CancelledError:
            await state.emit(RunFinished(StopReason.CANCELLED, state.step))
            raise
        finally:
            self._cancels.pop(state.session, None)
        log.info(
            "session %s: run stopped (%s) after %d steps",
            state.session,
            result.stop_reason.value,
            result.steps,
        )
        RUNS.labels(result.stop_reason.value).inc()
        await state.emit(RunFinished(result.stop_reason, result.steps, result.error))
        return result

    # --- decisions --------------------------------------------------------------------------

    async def decide(
        self,
        approval_id: str,
        approve: bool | Answer,
        actor: Actor,
        conversation: ConversationRef | None,
        reason: str | None = None,
        always: GrantTerms | None = None,
        job: str = "",
        edit: str | None = None,
        recorded: Recorded | None = None,
    ) -> Decision:
        """`conversation` is where the decision was made; None outside a chat (the CLI).
        `job`: the deciding inbox entry; delivered again, it continues what it began. Redis
        failing is raised (the job is tried again). `Answer`: a question's, by its asker."""
        # The decision's and the resumed run's records together.
        async with self.audit.unit(), closing.joined(self.history.redis):
            decision = (approval_id, approve, actor, conversation, reason, always)
            return await self._decide(*decision, job or new_job(), edit, recorded)

    async def _decide(
        self,
        approval_id: str,
        approve: bool | Answer,
        actor: Actor,
        conversation: ConversationRef | None,
        reason: str | None,
        always: GrantTerms | None,
        job: str,
        edit: str | None = None,
        recorded: Recorded | None = None,
    ) -> Decision:
        decided = await self.decisions.record(
            approval_id, approve, actor, conversation, reason, always, job, edit
        )
        if isinstance(decided, Decision):
            return decided
        if isinstance(decided, Retaken):
            return await self._continue_decided(decided, job)
        if isinstance(decided, Batch) or decided.checkpoint.batch:  # runtime/batch_runs.py
            asked = (approve, actor, conversation, reason, always, job)
            return await self.batch_runs.decided(decided, asked, self._decide, recorded)
        record = decided.record
        note = await self.decisions.announce(decided, actor, always)
        if recorded is not None:
            await recorded(record, note)
        async with self.tracer.trace(
            "approval.resume",
            session=record.session,
            resumes=decided.checkpoint.trace_id,
            origin=decided.checkpoint.trace_origin,
            approval_id=record.id,
            decision=record.status.value,
            decided_by=actor.key,
            tool=record.tool,
            conversation=record.conversation.id,
        ) as trace:
            result, held = await self._resume(decided, actor)
            result = trace.done(result)
        await self.runs.finish(record.session, job)
        if held:
            await self.release_held(record.session)
        verb = "answered" if record.is_question else "approved" if approve else "rejected"
        if decided.checkpoint.edit:
            note = f" It ran with your edits ({decided.checkpoint.edit}).{note}"
        return Decision(True, f"Approval {record.id} {verb}.{note}", result)

    async def _continue_decided(self, retaken: Retaken, job: str) -> Decision:
        """The deciding job again, its process having died after the decision: continue the
        run it resumed (unless that ended), then the messages held meanwhile (a held message
        whose run was cut short is retaken there)."""
        record, checkpoint = retaken.record, retaken.checkpoint
        entry = await self.runs.latest(record.session)
        result = None
        if entry.job == job and not entry.done:
            ctx = self._context(record.session, checkpoint.actor, checkpoint.conversation, True)
            emit = self._emitter(checkpoint.conversation)
            state = RunState.of(entry.window, record.session, ctx, emit)
            result = await self._drive(state, self.retake(state, entry.start))
            await self.runs.finish(record.session, job)
        await self.release_held(record.session)
        return Decision(True, f"Approval {record.id}: continued after a restart.", result)

    async def precheck(
        self, approval_id: str, actor: Actor, conversation: ConversationRef
    ) -> tuple[str | None, str | None]:
        """(why `actor` cannot decide it here or None, the approval's session or None): for
        platforms that must answer a click at once (see Decisions.precheck)."""
        return await self.decisions.precheck(approval_id, actor, conversation)

    async def _resume(self, decided: Decided, decider: Actor) -> tuple[RunResult, int]:
        """Continue the run from its checkpoint: the decided call's result (a rejection, or the
        approved call's output) is already in history; the rest of its batch runs, then the
        loop goes on. Also returns how many messages were held when the session was
        released."""
        record, checkpoint = decided.record, decided.checkpoint
        # The policy read just before the decision: fresh enough to run with.
        policy = (decided.policy, decided.policy_read_at)
        state = self.batch_runs.resumed(checkpoint, decided.window, record.id, policy)
        ctx = state.ctx
        call = checkpoint.calls[checkpoint.index]
        tracing.begin_step(checkpoint.step, resumed=record.id, call=(call.id, checkpoint.index))
        first, held = decided.result, decided.held
        if first is None:
            self._cancels[state.session] = ctx.cancelled  # /cancel reaches the approved call
            try:
                executed = await self.approved_calls.execute(
                    record, checkpoint, lambda: self.loop.run_granted(state, call, record.id)
                )
            except BaseException:
                self._cancels.pop(state.session, None)
                raise
            if executed is None:  # recovery settled it meanwhile and wrote its result
                self._cancels.pop(state.session, None)
                failed = RunResult(
                    session=state.session,
                    stop_reason=StopReason.ERROR,
                    steps=state.step,
                    error="the approval was settled by recovery while it ran",
                )
                return failed, 1
            first, held = executed
            state.history.append(first.to_message())
        elif record.status is ApprovalStatus.REJECTED:
            state.rejected[fingerprint(call)] = decider.key
        released = [held]

        async def continue_run() -> tuple[RunResult, Suspension | None]:
            if not is_last(checkpoint):
                stop = await self.loop.run_batch(
                    state,
                    checkpoint.calls,
                    checkpoint.index + 1,
                    [*checkpoint.prior_results, first],
                )
                if stop is not None and stop[1] is not None:
                    # Suspended again: the session waits (its new checkpoint holds the mark).
                    return stop
                # The whole batch is answered in history: only now may other messages run.
                released[0] = await self.approvals.release(checkpoint.session, record.id)
                if stop is not None:
                    return stop
            return await self.loop.run(state)

        return await self._drive(state, continue_run()), released[0]

    async def knows(self, session: str) -> bool:
        """Whether the session has a history (the bot has taken part in it)."""
        return await self.history.length(session) > 0

    # --- held messages, cancel, pending ----------------------------------------------------

    async def release_held(self, session: str) -> RunResult | None:
        """Run the messages held during a wait, in order, until one suspends again. Each
        stays in its list until its run finished: a crash mid-way retakes it."""
        await self.batch_runs.expired(session)
        result = None
        while (raw := await self.runs.first_held(session)) is not None:
            message = HeldMessage.model_validate_json(raw)
            message = message.model_copy(update={"job": held_job(raw, message.job)})
            user = encode_message(message.user_message())
            entry = await self.runs.start_held(session, raw, user, message.job)
            if entry.state == "waiting":
                break
            if entry.state != "moved":
                result = await self._run_entry(session, message, entry, held=raw)
        return result

    async def cancel(
        self, session: str, actor: Actor, conversation: ConversationRef, job: str = ""
    ) -> str:
        """Stop the session's running request (in this process) and withdraw its pending
        approval, if any. `job`: the `/cancel`'s inbox entry (a run it was queued behind
        stopped at its next step: runtime/queue/steering.py)."""
        said = []
        event = self._cancels.get(session)
        if event is not None:
            event.set()
            said.append("Stopping the running request.")
        elif job and await self.runs.stopped_for(session, job):
            said.append("The running request stopped at its next step.")
        approval_id = await self.approvals.pending_id(session)
        loaded = None if approval_id is None else await self.approvals.load(approval_id)
        if loaded is not None:
            message, withdrawn = await self.decisions.withdraw(*loaded, actor, conversation)
            said.append(message)
            if withdrawn:  # the run that waited ends where it ran
                await self._emitter(loaded[1].conversation)(RunFinished(StopReason.CANCELLED, 0))
                await self.release_held(session)
        return " ".join(said) or "Nothing to cancel."

    async def pending(self, conversation: ConversationRef | None = None) -> list[ApprovalNotice]:
        """Open approvals (pending or executing), of one conversation or all of them."""
        return await self.wing.pending(conversation)

    # --- expiry and crash recovery ---------------------------------------------------------

    async def sweep(self) -> int:
        """Expire overdue approvals and settle calls whose executing process died (see
        Settlement.sweep). Returns how many approvals changed."""
        return await self.settlement.sweep()

    async def _release_later(self, record: ApprovalRecord) -> None:
        if self.release is None:
            await self.release_held(record.session)
        else:
            await self.release(record.session, record.conversation)
