"""Retaking a run whose process died (kill -9, a crash, a lost host): it goes on from what
history records, as the run journal (runtime/store/runs.py) found it. Never the user's
message again, never a recorded call again; of the calls that had no result, those that
cannot have changed anything (never started, read-only, keyed: runtime/unfinished.py) run
again, and one that may have taken effect ends with an unknown outcome; a run that waited
for a decision waits on."""

from __future__ import annotations

import asyncio

from runtime.approval.models import ApprovalRecord, ApprovalStatus, Checkpoint
from runtime.approval.wing import ApprovalWing
from runtime.batch_resume import BatchResume
from runtime.channel import Notice, Reply
from runtime.loop import EMPTY_ANSWER, AgentLoop, RunState, Suspension, answer_key
from runtime.metrics import RETAKEN_CALLS
from runtime.models import AssistantMessage, RunResult, StopReason
from runtime.unfinished import Unfinished, unfinished

CONTINUING = (
    "Continuing where I stopped: the process working on this was restarted. Steps already "
    "done are not repeated."
)


class Retake:
    def __init__(self, loop: AgentLoop, wing: ApprovalWing, batches: BatchResume) -> None:
        """`wing.worker_id`: this process's; an approval it executes in a run that failed
        (Redis stalled) is not being executed any more when the job is tried again.
        `batches` carries a batch out (again) once it is decided."""
        self.loop = loop
        self.batches = batches
        self.worker_id = wing.worker_id
        self.approvals = wing.store
        self.history = wing.history
        self.suspender = wing.suspender
        self.settlement = wing.settlement
        self.liveness_ttl = wing.liveness_ttl

    async def __call__(self, state: RunState, start: int) -> tuple[RunResult, Suspension | None]:
        """Continue a run whose process died, from what history records (`start`: the
        session's index where the run's turn begins; the state holds the history from there
        or earlier): never its message again, never a recorded call again; the calls left
        without a result run again when none of them may have taken effect, else the one
        that may have ends with an unknown outcome. A run waiting for a decision waits on."""
        await state.emit(Notice(CONTINUING))
        state.step = sum(isinstance(m, AssistantMessage) for m in state.since(start))
        approval_id = await self.approvals.pending_id(state.session)
        loaded = None if approval_id is None else await self.approvals.load(approval_id)
        if loaded is not None and loaded[1].batch:
            return await self._batch(state, *loaded)
        if approval_id is not None:
            waiting = await self._settle(state, approval_id)
            if waiting is not None:
                return waiting, None
            # Settling a call that was executing answered its batch in history after this run
            # read it: go on from there, or the run would answer those calls again and key its
            # answer by a stale index (posted twice if it is retaken once more).
            state.history.extend(await self.history.since(state.session, state.end))
            state.resumed_from = approval_id  # the rest of its batch is this run's
        left = await self._unfinished(state, start)
        if left is not None and left.again:
            stop = await self.loop.run_batch(state, left.calls, left.index, left.prior)
            if stop is not None and stop[1] is not None:
                return stop  # suspended: the new checkpoint takes the waiting mark over
            if approval_id is not None:
                await self.approvals.release(state.session, approval_id)
            return stop if stop is not None else await self.loop.run(state)
        await self.loop.append(state, [] if left is None else left.answers())
        if approval_id is not None:  # its batch is answered now: the session waits no more
            await self.approvals.release(state.session, approval_id)
        last = state.history[-1]
        answered = isinstance(last, AssistantMessage) and not last.tool_calls
        if answered and state.end > start + 1:  # maybe not posted before the crash
            text = last.content or EMPTY_ANSWER
            key = answer_key(state.session, state.end - 1)
            await state.emit(Reply(text, key=key, again=True))
            return self.loop.result(state, StopReason.FINAL, final_text=text), None
        return await self.loop.run(state)

    async def _batch(
        self, state: RunState, lead: ApprovalRecord, checkpoint: Checkpoint
    ) -> tuple[RunResult, Suspension | None]:
        """A session waiting for a batch: it waits on while items do (its notice posted if the
        crash came first), else the batch's resume that died goes on where it stopped."""
        if await self.approvals.resumer(state.session, lead.id) is not None:
            return await self.batches(state, checkpoint, retaken=True)
        if not lead.notified:
            items = [r for r, _ in await self.approvals.load_batch(checkpoint)]
            await self.suspender.notify(lead, again=True, batch=items, batch_id=checkpoint.id)
        waiting = RunResult(
            session=state.session,
            stop_reason=StopReason.APPROVAL_REQUIRED,
            steps=state.step,
            approval_id=lead.id,
        )
        return waiting, None

    async def _unfinished(self, state: RunState, start: int) -> Unfinished | None:
        """The calls the dead process left without a result (runtime/unfinished.py), each
        audited: run again (with what it was, or `not-started`), or its outcome unknown."""
        journal = self.loop.journal
        marks = None if journal is None else await journal.marks(state.session)
        left = unfinished(state, start, marks, self.loop.registry)
        if left is None:
            return None
        audit = self.settlement.audit
        for call in left.calls[left.index :]:
            unknown = call.id in left.unknown
            if left.again or unknown:
                RETAKEN_CALLS.labels("outcome_unknown" if unknown else "run_again").inc()
                await audit.record(
                    "call_outcome_unknown" if unknown else "call_run_again",
                    session=state.session,
                    tool=call.name,
                    call=call.id,
                    kind=left.kinds[call.id],
                )
        return left

    async def _settle(self, state: RunState, approval_id: str) -> RunResult | None:
        """The approval a retaken run's session waits for: still pending (the run waits on;
        its notice posted if the crash came first), or executing in the dead process (its
        outcome is unknown: settled now). None when the run may go on."""
        loaded = await self.approvals.load(approval_id)
        if loaded is None:
            return None
        record, checkpoint = loaded
        if record.status is ApprovalStatus.PENDING:
            if not record.notified:
                await self.suspender.notify(record, again=True)
            return RunResult(
                session=state.session,
                stop_reason=StopReason.APPROVAL_REQUIRED,
                steps=state.step,
                approval_id=record.id,
            )
        if record.status is ApprovalStatus.EXECUTING and record.worker is not None:
            if record.worker != self.worker_id and not await self._died(record.worker):
                # A live process executes it: that process goes on with the run.
                return RunResult(
                    session=state.session, stop_reason=StopReason.ERROR, steps=state.step
                )
            if (await self.approvals.mark_outcome_unknown(record, record.worker)).ok:
                await self.approvals.forget(record.id)
                await self.settlement.after_outcome_unknown(record, checkpoint, run_held=False)
        return None

    async def _died(self, worker: str) -> bool:
        """Wait (up to twice the liveness time) for `worker`'s liveness mark to lapse."""
        deadline = asyncio.get_running_loop().time() + 2 * self.liveness_ttl
        while await self.approvals.worker_alive(worker):
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.25)
        return True
