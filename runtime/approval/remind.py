"""Reminders and escalation of approvals nobody decides: when the policy says so, a request
still pending is brought up again in its thread and in the approvers' channels
(`remind_after`), and later may be decided by a second group of people too (`escalate_after`,
`escalate_to`), who are told. The sweeper runs this; each step happens once (a flag set by a
script), whichever process sweeps."""

from __future__ import annotations

import time

from runtime.approval.models import ApprovalRecord, ApprovalStatus
from runtime.approval.notices import routed
from runtime.approval.store import ApprovalStore
from runtime.audit import AuditLog
from runtime.channel import Notice, Send


def _utc(ms: int) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(ms / 1000))


class Reminders:
    def __init__(self, approvals: ApprovalStore, audit: AuditLog, send: Send) -> None:
        self.approvals = approvals
        self.audit = audit
        self.send = send

    async def sweep(self, now_ms: int) -> int:
        """Remind of and escalate the approvals that are due; returns how many steps ran."""
        done = 0
        for approval_id in await self.approvals.reminders_due(now_ms):
            loaded = await self.approvals.load(approval_id)
            if loaded is None or loaded[0].status is not ApprovalStatus.PENDING:
                await self.approvals.remind_next(approval_id, None)
                continue
            record = loaded[0]
            steps = [
                ("reminded", record.remind_after_ms, record.reminded),
                ("escalated", record.escalate_after_ms, record.escalated),
            ]
            later = []
            for name, delay, taken in steps:
                if delay is None or taken:
                    continue
                if record.created_at + delay > now_ms:
                    later.append(record.created_at + delay)
                elif await self.approvals.flag(record, name):
                    await (self.remind(record) if name == "reminded" else self.escalate(record))
                    done += 1
            await self.approvals.remind_next(approval_id, min(later, default=None))
        return done

    async def _tell(self, record: ApprovalRecord, event: str, text: str, **extra: str) -> None:
        """Say `text` in the thread that asked and in every conversation the request was
        posted to; audit `event`."""
        await self.send(record.conversation, Notice(text))
        for conversation_id in record.routes:
            await self.send(routed(conversation_id), Notice(text))
        await self.audit.record(
            event,
            approval=record.id,
            tool=record.tool,
            session=record.session,
            conversation=record.conversation.id,
            **extra,
        )

    async def remind(self, record: ApprovalRecord) -> None:
        what = f"approval {record.id} ({record.tool}, asked in {record.conversation.id})"
        await self._tell(
            record,
            "approval_reminded",
            f"Reminder: {what} still waits for a decision; it expires at "
            f"{_utc(record.expires_at)}. /approve {record.id} or /reject {record.id} <reason>.",
        )

    async def escalate(self, record: ApprovalRecord) -> None:
        who = ", ".join(record.escalate_to) or "nobody more"
        what = f"Approval {record.id} ({record.tool}, asked in {record.conversation.id})"
        await self._tell(
            record,
            "approval_escalated",
            f"{what} is still undecided: now {who} may decide it too. It expires at "
            f"{_utc(record.expires_at)}.",
            escalated_to=who,
        )
