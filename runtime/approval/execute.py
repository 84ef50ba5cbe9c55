"""Running an approved call exactly once: its integrity re-checked, judged again on its way
through the chain (runtime/approval/rejudge.py: a call that changed since it was approved is
not run, and the chat is told), `executing` while its process renews its liveness mark,
`consumed` with its result in one script; a call interrupted mid-way ends `outcome_unknown`
and is never run again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from redis.exceptions import RedisError

from runtime.approval.decisions import checkpoint_hash
from runtime.approval.models import ApprovalRecord, Checkpoint
from runtime.approval.notices import is_last, not_executed
from runtime.approval.settle import Settlement
from runtime.approval.store import ApprovalStore
from runtime.audit import AuditLog
from runtime.channel import Reply
from runtime.models import ToolResult, ToolStatus
from runtime.store.history import encode_message

log = logging.getLogger(__name__)

RunCall = Callable[[], Awaitable[ToolResult]]


def with_edit(result: ToolResult, edit: str | None) -> ToolResult:
    """The model is told when the call ran with an approver's edits, and which."""
    if edit is None:
        return result
    note = f"(run with the approver's edits: {edit})\n"
    return result.model_copy(update={"model_text": note + result.model_text})


class ApprovedCalls:
    def __init__(
        self,
        approvals: ApprovalStore,
        audit: AuditLog,
        settlement: Settlement,
        worker_id: str,
        liveness_ttl: float,
    ) -> None:
        self.approvals = approvals
        self.audit = audit
        self.settlement = settlement
        self.worker_id = worker_id
        self.liveness_ttl = liveness_ttl

    async def execute(
        self, record: ApprovalRecord, checkpoint: Checkpoint, run: RunCall
    ) -> tuple[ToolResult, int] | None:
        """Run the frozen call (status `executing` since the decision) with `run` -> consumed,
        its result recorded in history by the same script; also how many messages the
        session held. None when recovery took the approval over meanwhile: then the call's
        answer is not ours to write."""
        call = checkpoint.calls[checkpoint.index]
        async with self._renewing_mark():
            if checkpoint_hash(checkpoint) != record.call_hash:
                result = not_executed(call, "the approved call failed its integrity check")
            else:
                try:
                    result = with_edit(await run(), checkpoint.edit)
                except BaseException:
                    # Cancelled or crashed mid-call: whether it took effect is unknown.
                    await asyncio.shield(self._interrupted(record, checkpoint))
                    raise
            consumed = await self.approvals.consume(
                record,
                result.status.value,
                encode_message(result.to_message()),
                last=is_last(checkpoint),
            )
        if not consumed.ok:
            log.warning("approval %s was settled by recovery while it ran", record.id)
            return None
        await self.audit.record(
            "approval_consumed",
            record.decided_by or "",
            approval=record.id,
            tool=record.tool,
            status=result.status.value,
            session=record.session,
            conversation=record.conversation.id,
        )
        if result.status is ToolStatus.DENIED:
            # Refused at run time (judged again, or its tool denied meanwhile): the approver
            # and the requester are told in the chat, not only the model.
            await self.settlement.send(
                record.conversation,
                Reply(f"Approval {record.id} ({record.tool}): {result.model_text}"),
            )
        return result, consumed.held

    async def _interrupted(self, record: ApprovalRecord, checkpoint: Checkpoint) -> None:
        try:
            if (await self.approvals.mark_outcome_unknown(record, self.worker_id)).ok:
                await self.approvals.forget(record.id)
                await self.settlement.after_outcome_unknown(record, checkpoint, run_held=False)
        except Exception:
            log.exception("approval %s: could not record an interrupted execution", record.id)

    @contextlib.asynccontextmanager
    async def _renewing_mark(self) -> AsyncIterator[None]:
        """Renew this process's liveness mark (first written with the decision:
        runtime/ownership/) while it executes an approved call, so a crash is told apart from
        a slow tool."""
        ttl = self.liveness_ttl

        async def renew() -> None:
            while True:
                await asyncio.sleep(ttl / 3)
                try:
                    await self.approvals.renew_mark(self.worker_id, ttl)
                except RedisError:
                    log.warning("liveness mark renewal failed; retrying")

        task = asyncio.create_task(renew())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
