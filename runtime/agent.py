"""The runtime's public API, used by every adapter:

- `run(session, text, actor, conversation)`: one message; held while the session waits for a
  decision, else it runs the agent loop.
- `decide(approval_id, approve, actor, conversation, ...)`: a human's answer; on approve the
  frozen call runs exactly once and the run continues from its checkpoint, in any process.
- `cancel`, `pending`, `sweep` (expiry and crash recovery).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from runtime.approval.decisions import REDIS_DOWN, Decided, Decision, Decisions, refused
from runtime.approval.execute import ApprovedCalls
from runtime.approval.models import ApprovalRecord, ApprovalStatus, HeldMessage
from runtime.approval.notices import is_last, notice_of
from runtime.approval.settle import Settlement
from runtime.approval.store import ApprovalStore
from runtime.approval.suspend import Suspender
from runtime.audit import AuditLog
from runtime.channel import ApprovalNotice, Channel, Event, Notice, Reply, RunFinished
from runtime.executor import Emit
from runtime.loop import AgentLoop, RunState, Suspension, fingerprint
from runtime.metrics import RUNS
from runtime.middleware.chain import Middleware
from runtime.middleware.default import default_chain
from runtime.models import Actor, ConversationRef, Message, RunResult, StopReason, UserMessage
from runtime.policy.service import PolicyService
from runtime.providers.base import Provider
from runtime.store.history import HistoryStore, encode_message, parse_history
from runtime.tools.base import ToolContext
from runtime.tools.registry import ToolRegistry
from runtime.tracing import hooks as tracing
from runtime.tracing.recorder import Tracer

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = (
    "You are clawgate, a careful engineering assistant working inside a team chat. "
    "You can use tools on the files of one work directory. Prefer reading before changing. "
    "Some tool calls need a human's approval or are denied by policy; when a call is denied or "
    "rejected, do not retry it unchanged. Answer concisely."
)
DEMO_NOTICE = (
    "Using the offline demo model (no OPENAI_API_KEY or OPENAI_BASE_URL). "
    "Try: read README.md, run: ls, write notes.txt: hello"
)
LoopWork = Coroutine[Any, Any, tuple[RunResult, Suspension | None]]
OPEN = (ApprovalStatus.PENDING, ApprovalStatus.EXECUTING)
Release = Callable[[str, ConversationRef], Awaitable[None]]
REDIS_DOWN_RUN = (
    "Sorry, I cannot reach my storage (Redis) right now, so your request was not (fully) "
    "processed; please try again shortly."
)


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    workdir: Path
    max_steps: int = 12
    max_tool_result_chars: int = 16_000
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    liveness_ttl: float = 30.0  # seconds a silent process is presumed alive while executing


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
    ) -> None:
        """`release` runs the messages a session held once its wait ended outside a run (an
        expiry, a crashed execution): None runs them right here (a single-process chat);
        a server queues them in the session's lane instead, so they never run beside it.
        `audit` is the global audit trail (default: on the approvals' Redis and prefix).
        `middlewares`: the chain every tool call runs through; by default the one order every
        process uses (runtime.middleware.default_chain)."""
        self.config = config
        self.release = release
        self.provider = provider
        self.registry = registry
        self.history = history
        self.channel = channel
        self.approvals = approvals
        self.audit = audit or AuditLog(approvals.redis, approvals.keys)
        self.policies = policies
        self.tracer = tracer or Tracer()  # default: off
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
        )
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._cancels: dict[str, asyncio.Event] = {}
        self.settlement = Settlement(
            approvals, self.audit, self.tracer, channel.send, self._release_later
        )
        self.decisions = Decisions(
            approvals, policies, self.audit, self.settlement, self.worker_id, config.liveness_ttl
        )
        self.suspender = Suspender(approvals, history, self.audit, channel.send)
        self.approved_calls = ApprovedCalls(
            approvals, self.audit, self.settlement, self.worker_id, config.liveness_ttl
        )

    def _emitter(self, conversation: ConversationRef) -> Emit:
        async def emit(event: Event) -> None:
            await self.channel.send(conversation, event)

        return emit

    # --- messages ---------------------------------------------------------------------------

    async def run(
        self, session: str, text: str, actor: Actor, conversation: ConversationRef
    ) -> RunResult:
        """Handle one message. If Redis is unreachable the sender is told; a message that could
        not even be recorded never ran."""
        try:
            async with self.audit.unit():  # the run's records in as few round trips as may be
                return await self._enter(session, text, actor, conversation)
        except RedisError as exc:
            # An outage, not a bug: one line, no traceback.
            log.error("session %s: Redis unavailable (%s)", session, exc)
            await self._emitter(conversation)(Reply(REDIS_DOWN_RUN))
            return RunResult(
                session=session, stop_reason=StopReason.ERROR, steps=0, error=REDIS_DOWN_RUN
            )

    async def _enter(
        self, session: str, text: str, actor: Actor, conversation: ConversationRef
    ) -> RunResult:
        held = HeldMessage(text=text, actor=actor, conversation=conversation)
        user = UserMessage(content=text, actor=actor.key)
        count, approval_id, raw = await self.approvals.enter(
            session, held.model_dump_json(), encode_message(user)
        )
        if not count:
            return await self._run_message(session, held, parse_history(raw))
        waiting = RunResult(
            session=session,
            stop_reason=StopReason.APPROVAL_REQUIRED,
            steps=0,
            approval_id=approval_id or None,
            held=True,
        )
        if not approval_id:
            # Leftovers of an interrupted wait: they run first, in arrival order, then this one
            # (unless the session started waiting again meanwhile: then all of them wait).
            return await self._release_held(session) or waiting
        if count == 1:  # tell the sender once per wait, not for every message
            await self._emitter(conversation)(
                Notice(
                    f"Waiting for a decision on approval {approval_id}; your message will "
                    "run after it."
                )
            )
        return waiting

    async def _run_message(
        self, session: str, message: HeldMessage, history: list[Message] | None = None
    ) -> RunResult:
        """Run one message; `history` is given when the message is already appended to it."""
        emit = self._emitter(message.conversation)
        if history is None:
            user = UserMessage(content=message.text, actor=message.actor.key)
            history = await self.history.append_and_load(session, user)
        if self.provider.offline_demo and len(history) == 1:
            await emit(Notice(DEMO_NOTICE))
        ctx = self._context(session, message.actor, message.conversation)
        state = RunState(session=session, history=history, ctx=ctx, emit=emit)
        async with self.tracer.trace(
            "agent.run", session=session, actor=message.actor.key, payloads={"input": message.text}
        ) as trace:
            return trace.done(await self._drive(state, self.loop.run(state)))

    def _context(self, session: str, actor: Actor, conversation: ConversationRef) -> ToolContext:
        return ToolContext(
            session=session, workdir=self.config.workdir, actor=actor, conversation=conversation
        )

    async def _drive(self, state: RunState, work: LoopWork) -> RunResult:
        """Await the loop (or a resumed batch), checkpoint a suspension, report the end."""
        self._cancels[state.session] = state.ctx.cancelled
        try:
            result, suspension = await work
            if suspension is not None:
                result = await self.suspend(state, suspension, result)
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

    # --- suspension -------------------------------------------------------------------------

    async def suspend(
        self, state: RunState, suspension: Suspension, result: RunResult
    ) -> RunResult:
        """Checkpoint a suspended run and post its approval notice (see Suspender)."""
        return await self.suspender.suspend(state, suspension, result)

    # --- decisions --------------------------------------------------------------------------

    async def decide(
        self,
        approval_id: str,
        approve: bool,
        actor: Actor,
        conversation: ConversationRef | None,
        reason: str | None = None,
        always: bool = False,
    ) -> Decision:
        """`conversation` is where the decision was made; None only for the operator CLI."""
        async with self.audit.unit():  # the decision's and the resumed run's records together
            return await self._decide(approval_id, approve, actor, conversation, reason, always)

    async def _decide(
        self,
        approval_id: str,
        approve: bool,
        actor: Actor,
        conversation: ConversationRef | None,
        reason: str | None,
        always: bool,
    ) -> Decision:
        try:
            decided = await self.decisions.record(
                approval_id, approve, actor, conversation, reason, always
            )
        except RedisError as exc:
            log.error("decision on %s failed: Redis unavailable (%s)", approval_id, exc)
            return refused(REDIS_DOWN)
        if isinstance(decided, Decision):
            return decided
        record = decided.record
        try:
            note = await self.decisions.announce(decided, actor, always)
            async with self.tracer.trace(
                "approval.resume",
                session=record.session,
                resumes=decided.checkpoint.trace_id,
                approval_id=record.id,
                decision=record.status.value,
                decided_by=actor.key,
                tool=record.tool,
            ) as trace:
                result, held = await self._resume(decided, actor)
                result = trace.done(result)
            if held:
                await self._release_held(record.session)
        except RedisError as exc:
            # Past the point of no return: say what is known, never "nothing was executed".
            log.error("approval %s: Redis failed after the decision (%s)", record.id, exc)
            return Decision(
                True,
                f"Approval {record.id} was recorded, but Redis became unreachable while the run "
                "continued; the conversation may be incomplete.",
            )
        verb = "approved" if approve else "rejected"
        return Decision(True, f"Approval {record.id} {verb}.{note}", result)

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
        emit = self._emitter(checkpoint.conversation)
        ctx = self._context(checkpoint.session, checkpoint.actor, checkpoint.conversation)
        ctx.policy = decided.policy  # read just before the decision: fresh enough to run with
        state = RunState(
            checkpoint.session,
            decided.history,
            ctx,
            emit,
            step=checkpoint.step,
            resumed_from=record.id,
            policy_read_at=decided.policy_read_at,
        )
        call = checkpoint.calls[checkpoint.index]
        tracing.begin_step(checkpoint.step, resumed=record.id, call=(call.id, checkpoint.index))
        first, held = decided.rejection, decided.held
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
        else:
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
                    # Suspended again: the session keeps waiting (the new checkpoint takes the
                    # pending mark over) until the rest of the batch is answered.
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

    async def _release_held(self, session: str) -> RunResult | None:
        """Run messages that arrived during the wait, in order, until one suspends again."""
        result = None
        while (raw := await self.approvals.pop_held(session)) is not None:
            result = await self._run_message(session, HeldMessage.model_validate_json(raw))
        return result

    async def cancel(self, session: str, actor: Actor, conversation: ConversationRef) -> str:
        """Stop the session's running request (in this process) and withdraw its pending
        approval, if any."""
        said = []
        event = self._cancels.get(session)
        if event is not None:
            event.set()
            said.append("Stopping the running request.")
        approval_id = await self.approvals.pending_id(session)
        loaded = None if approval_id is None else await self.approvals.load(approval_id)
        if loaded is not None:
            message, withdrawn = await self.decisions.withdraw(*loaded, actor, conversation)
            said.append(message)
            if withdrawn:  # the run that waited ends where it ran
                await self._emitter(loaded[1].conversation)(RunFinished(StopReason.CANCELLED, 0))
                await self._release_held(session)
        return " ".join(said) or "Nothing to cancel."

    async def pending(self, conversation: ConversationRef | None = None) -> list[ApprovalNotice]:
        """Open approvals (pending or executing), of one conversation or all of them."""
        notices = []
        for approval_id in await self.approvals.open_ids():
            loaded = await self.approvals.load(approval_id)
            if loaded is None or loaded[0].status not in OPEN:
                continue
            record = loaded[0]
            if conversation is None or record.conversation.id == conversation.id:
                notices.append(notice_of(record))
        return notices

    # --- expiry and crash recovery ---------------------------------------------------------

    async def sweep(self) -> int:
        """Expire overdue approvals and settle calls whose executing process died (see
        Settlement.sweep). Returns how many approvals changed."""
        return await self.settlement.sweep()

    async def _release_later(self, record: ApprovalRecord) -> None:
        if self.release is None:
            await self._release_held(record.session)
        else:
            await self.release(record.session, record.conversation)

    async def release_held(self, session: str) -> RunResult | None:
        """Run the messages the session held, in order (a queued "release" job)."""
        return await self._release_held(session)
