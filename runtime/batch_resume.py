"""Carrying out a decided batch: the calls of one model turn that were put to approvers together
(runtime/approval/suspend.py), once none of them waits. The turn's calls go on in the model's
order: an approved one runs exactly once (approved -> executing -> consumed, as a single
approval), a rejected or expired one is answered as such, and the calls that needed nobody keep
their place between them. Every answer is in history before the next call starts, so a retake
(the resuming job delivered again after its process died) goes on from what history records:
nothing runs twice; a call the dead process may have run ends "outcome unknown" unless its mark
in the run journal says it never started or may run again (runtime/unfinished.py)."""

from __future__ import annotations

from runtime.approval.execute import ApprovedCalls
from runtime.approval.models import ApprovalRecord, ApprovalStatus, Checkpoint
from runtime.approval.notices import not_executed, rejection
from runtime.approval.settle import EXPIRED_CALL, Settlement
from runtime.executor import duplicate
from runtime.loop import OUTCOME_UNKNOWN, AgentLoop, RunState, Suspension, fingerprint
from runtime.models import (
    AssistantMessage,
    RunResult,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolStatus,
)
from runtime.store.history import HistoryStore
from runtime.store.runs import CallMark
from runtime.tracing import hooks as tracing

CANCELLED = "not executed: the run was cancelled before this call"
ASKS_NOW = (
    "not executed: it needs a human's approval now (the policy changed while its batch "
    "waited); ask again if it is still needed"
)


def result_of(message: ToolMessage) -> ToolResult:
    """A recorded tool message as the result a batch continues with."""
    return ToolResult(
        call_id=message.tool_call_id,
        tool=message.name,
        status=message.status,
        model_text=message.content,
        display=message.content,
    )


def _failed(call: ToolCall, text: str, status: ToolStatus) -> ToolResult:
    return ToolResult(call_id=call.id, tool=call.name, status=status, model_text=text, display=text)


class BatchResume:
    def __init__(
        self,
        loop: AgentLoop,
        history: HistoryStore,
        approved_calls: ApprovedCalls,
        settlement: Settlement,
    ) -> None:
        """`approved_calls`: runs an approved call once, under its process's worker id."""
        self.loop = loop
        self.approvals = approved_calls.approvals
        self.history = history
        self.approved_calls = approved_calls
        self.settlement = settlement
        self.worker_id = approved_calls.worker_id

    async def __call__(
        self, state: RunState, checkpoint: Checkpoint, retaken: bool = False
    ) -> tuple[RunResult, Suspension | None]:
        """Carry out the batch of `checkpoint` (any of its copies), then go on with the rest of
        the turn and the loop. `retaken`: a process died while carrying it out; the first call
        without an answer in history may have been running."""
        items = {c.index: (r, c) for r, c in await self.approvals.load_batch(checkpoint)}
        calls, last = checkpoint.calls, max(items)
        tracing.begin_step(checkpoint.step, resumed=checkpoint.id)
        prior = list(checkpoint.prior_results)
        repeats = self.loop.repeats(state, calls)
        unsure = retaken  # the first call without an answer may have been running
        journal = self.loop.journal
        marks = None if journal is None or not retaken else await journal.marks(state.session)

        def maybe_ran(call: ToolCall) -> bool:
            return self._maybe_ran(call, marks, checkpoint.history_len)

        index = checkpoint.start
        while index < len(calls):
            call = calls[index]
            answered = self._answered(state, call)
            if answered is None:
                if index > last and not (unsure and maybe_ran(call)):
                    break  # the rest of the turn runs as any batch does (it may ask again)
                if index in repeats:  # answered as the call it repeats
                    answered = await self._record(state, duplicate(prior[repeats[index]], call))
                elif index in items:
                    answered = await self._item(state, *items[index], unsure)
                elif unsure and maybe_ran(call):
                    unknown = _failed(call, OUTCOME_UNKNOWN, ToolStatus.ERROR)
                    answered = await self._record(state, unknown)
                else:
                    answered = await self._free(state, call)
                unsure = False
            prior.append(answered)
            index += 1
        await self._show(items[min(items)][0], checkpoint)
        stop = None
        if index < len(calls):
            stop = await self.loop.run_batch(state, calls, index, prior)
            if stop is not None and stop[1] is not None:
                return stop  # suspended again: the new request takes the session's wait over
        # The whole turn is answered in history: only now may other messages run.
        await self.approvals.release(state.session, checkpoint.batch[0])
        return stop if stop is not None else await self.loop.run(state)

    @staticmethod
    def _answered(state: RunState, call: ToolCall) -> ToolResult | None:
        """The call's answer in history, after the model answer that asked for it."""
        for message in reversed(state.history):
            if isinstance(message, ToolMessage) and message.tool_call_id == call.id:
                return result_of(message)
            if isinstance(message, AssistantMessage) and any(
                c.id == call.id for c in message.tool_calls
            ):
                return None
        return None

    async def _record(self, state: RunState, result: ToolResult) -> ToolResult:
        await self.loop.append(state, [result.to_message()])
        return result

    async def _synced(self, state: RunState, call: ToolCall) -> ToolResult | None:
        """The call's answer once history is read again (another process may have written
        it: recovery answering an interrupted call)."""
        state.history.extend(await self.history.since(state.session, state.end))
        return self._answered(state, call)

    async def _item(
        self, state: RunState, record: ApprovalRecord, checkpoint: Checkpoint, unsure: bool
    ) -> ToolResult:
        """An item's answer: its approved call run once, or why it did not run."""
        call = checkpoint.calls[checkpoint.index]  # as approved (an approver may have edited it)
        loaded = await self.approvals.load(record.id)
        record = loaded[0] if loaded is not None else record
        status = record.status
        if status is ApprovalStatus.APPROVED and state.ctx.cancelled.is_set():
            await self.approvals.move(
                record,
                ApprovalStatus.APPROVED,
                ApprovalStatus.REJECTED,
                "runtime",
                fields={"reason": "the run was cancelled before it ran"},
            )
            await self.approved_calls.audit.record(
                "approved_call_cancelled",
                "runtime",
                approval=record.id,
                tool=record.tool,
                session=record.session,
                conversation=record.conversation.id,
                why="the run was cancelled before it ran",
            )
            return await self._record(state, _failed(call, CANCELLED, ToolStatus.CANCELLED))
        if status is ApprovalStatus.APPROVED:
            ttl = self.approved_calls.liveness_ttl
            if (await self.approvals.execute(record, self.worker_id, ttl)).ok:
                record = record.model_copy(update={"status": ApprovalStatus.EXECUTING})
                return await self._run(state, record, checkpoint, call)
            status = ApprovalStatus.OUTCOME_UNKNOWN  # settled meanwhile: read what it wrote
        if status is ApprovalStatus.REJECTED:
            who = record.decided_by or "an approver"
            state.rejected[fingerprint(call)] = who
            return await self._record(state, rejection(call, who, record.reason))
        if status is ApprovalStatus.EXPIRED:
            return await self._record(state, _failed(call, EXPIRED_CALL, ToolStatus.CANCELLED))
        # The dead process was running it: whether it took effect is unknown.
        if status is ApprovalStatus.EXECUTING and unsure and record.worker is not None:
            await self._interrupted(record, checkpoint, record.worker)
        # Consumed or outcome unknown: its answer is in history (or recovery stopped before
        # writing it, and it is written here); never run again.
        answered = await self._synced(state, call)
        if answered is not None:
            return answered
        return await self._record(state, _failed(call, OUTCOME_UNKNOWN, ToolStatus.ERROR))

    async def _interrupted(
        self, record: ApprovalRecord, checkpoint: Checkpoint, worker: str
    ) -> None:
        if (await self.approvals.mark_outcome_unknown(record, worker)).ok:
            await self.approvals.forget(record.id)
            await self.settlement.after_outcome_unknown(record, checkpoint, run_held=False)

    async def _run(
        self, state: RunState, record: ApprovalRecord, checkpoint: Checkpoint, call: ToolCall
    ) -> ToolResult:
        executed = await self.approved_calls.execute(
            record, checkpoint, lambda: self.loop.run_granted(state, call, record.id)
        )
        if executed is None:  # recovery settled it while it ran, and answered it
            answered = await self._synced(state, call)
            return answered or not_executed(call, "it was settled by recovery while it ran")
        result, _ = executed
        state.history.append(result.to_message())  # recorded by the consuming script
        return result

    def _maybe_ran(self, call: ToolCall, marks: dict[str, CallMark] | None, since: int) -> bool:
        """Whether the call may have taken effect in the process that died, so that it must
        not run again: by its mark in the run journal (runtime/unfinished.py; a call of this
        resume is marked at a history length from `since` on), else by its tool."""
        if marks is None:
            tool = self.loop.registry.resolve(call.name)
            return tool is None or not (tool.parallel_safe or tool.side_effect_free or tool.keyed)
        mark = marks.get(call.id)
        return mark is not None and mark.at >= since and not mark.again

    async def _free(self, state: RunState, call: ToolCall) -> ToolResult:
        """A call of the batch that needed nobody: run in its place."""
        if state.ctx.cancelled.is_set():
            return await self._record(state, _failed(call, CANCELLED, ToolStatus.CANCELLED))
        result = await self.loop.run_granted(state, call, None)
        if result.status is ToolStatus.SUSPENDED:  # never asked: not run (fail closed)
            result = _failed(call, ASKS_NOW, ToolStatus.DENIED)
        return await self._record(state, result)

    async def _show(self, record: ApprovalRecord, checkpoint: Checkpoint) -> None:
        """The batch's notice as its calls ended (ran, rejected, expired)."""
        loaded = await self.approvals.load(record.id)
        if loaded is not None:
            await self.settlement.update_notice(loaded[0], checkpoint)
