"""What one person may see and decide outside a chat (the web console): exactly what the chat
lets them decide. Admins of every conversation see everything; anyone else sees the approvals
whose conversation's policy lets them decide (as an admin or approver there, as the requester
where `requester_may_approve` is set, or as whom it was escalated to) and whose `[access]` lets
them use clawgate there. A direct conversation's requests are the admins' (and the requester's,
where allowed) unless the policy posts them somewhere approvers decide. Questions belong to
their asker and stay in the chat."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.approval.decisions import decider_refusal
from runtime.approval.models import ApprovalRecord, Checkpoint
from runtime.approval.notices import OPEN, notice_of
from runtime.approval.wing import ApprovalView
from runtime.channel import ApprovalNotice
from runtime.models import Actor
from runtime.policy.model import GLOBAL
from runtime.policy.resolve import EffectivePolicy
from runtime.policy.service import PolicyService


@dataclass(frozen=True, slots=True)
class DeskItem:
    record: ApprovalRecord
    checkpoint: Checkpoint
    notice: ApprovalNotice  # redacted, as a chat shows it


class ApprovalDesk:
    def __init__(self, view: ApprovalView, policies: PolicyService) -> None:
        self.view = view
        self.policies = policies

    def is_global_admin(self, actor: Actor) -> bool:
        return self.policies.reach(actor, GLOBAL) == GLOBAL

    def oversight(self, actor: Actor) -> Oversight:
        """What of the grants, the audit trail and the runs `actor` may see (one page's
        worth: it remembers each conversation's policy)."""
        return Oversight(actor, self.is_global_admin(actor), self.policies)

    async def refusal(self, actor: Actor, record: ApprovalRecord) -> str | None:
        """Why `actor` may neither see nor decide `record` (None: they may)."""
        if record.is_question:
            return "a question is answered by its asker, in the chat"
        return _refusal(await self.policies.effective(record.conversation.id), actor, record)

    async def item(self, actor: Actor, approval_id: str) -> DeskItem | str:
        """One approval `actor` may see, or why not (an unknown id reads the same as one
        they may not see: the console does not tell which ids exist)."""
        loaded = await self.view.load(approval_id)
        if loaded is None:
            return f"no approval {approval_id!r} that you may see"
        record, checkpoint = loaded
        if await self.refusal(actor, record) is not None:
            return f"no approval {approval_id!r} that you may see"
        return DeskItem(record, checkpoint, _notice(record, checkpoint))

    async def open_items(self, actor: Actor) -> list[DeskItem]:
        """The open approvals (pending or executing) `actor` may decide, oldest first."""
        oversight = self.oversight(actor)  # one policy read per conversation, not per approval
        found = []
        for approval_id in await self.view.store.open_ids():
            loaded = await self.view.load(approval_id)
            if loaded is None or loaded[0].status not in OPEN or loaded[0].is_question:
                continue
            record, checkpoint = loaded
            if not oversight.admin:
                policy = await oversight.policy(record.conversation.id)
                if _refusal(policy, actor, record) is not None:
                    continue
            found.append(DeskItem(record, checkpoint, _notice(record, checkpoint)))
        return sorted(found, key=lambda item: (item.record.created_at, item.record.id))


class Oversight:
    """Whether one person oversees a conversation: admins of every conversation oversee all;
    anyone else the conversations whose policy makes them an admin or an approver (and whose
    `[access]` lets them in). Conversation-less records (a policy reload) are the admins'."""

    def __init__(self, actor: Actor, admin: bool, policies: PolicyService) -> None:
        self.actor, self.admin, self.policies = actor, admin, policies
        self._known: dict[str, EffectivePolicy] = {}

    async def policy(self, conversation: str) -> EffectivePolicy:
        """The conversation's effective policy, read once a page."""
        if conversation not in self._known:
            self._known[conversation] = await self.policies.effective(conversation)
        return self._known[conversation]

    async def oversees(self, conversation: str | None) -> bool:
        if self.admin:
            return True
        if not conversation:
            return False
        policy = await self.policy(conversation)
        deciders = policy.approver_policy()
        return (
            deciders.is_admin(self.actor) or self.actor.key in deciders.approvers
        ) and policy.access_refusal(self.actor, direct=False) is None

    async def administers(self, conversation: str | None) -> bool:
        """Whether they are an admin there (as the chat asks before a grant is revoked);
        of a conversation-less thing (a grant for everywhere), admins of every one are."""
        if self.admin:
            return True
        if not conversation:
            return False
        return (await self.policy(conversation)).approver_policy().is_admin(self.actor)


def _refusal(policy: EffectivePolicy, actor: Actor, record: ApprovalRecord) -> str | None:
    """Why `actor` may not decide `record` under `policy`: the chat's rule, `[access]`, and
    the rule of direct conversations."""
    return (
        decider_refusal(policy, actor, record)
        or policy.access_refusal(actor, record.conversation.direct)
        or _direct(policy, actor, record)
    )


def _direct(policy: EffectivePolicy, actor: Actor, record: ApprovalRecord) -> str | None:
    """A direct conversation's request is decided in it, or where the policy posts it too,
    or by whom it was escalated to (the chat's rule): an approver who could do none of that
    does not see someone's direct messages in the console either; admins do."""
    if not record.conversation.direct or record.routes or policy.approver_policy().is_admin(actor):
        return None
    if actor.key == record.requester.key or (record.escalated and actor.key in record.escalate_to):
        return None
    return "a direct conversation's requests are decided in it"


def _notice(record: ApprovalRecord, checkpoint: Checkpoint) -> ApprovalNotice:
    return notice_of(record, checkpoint.id if checkpoint.batch else "")
