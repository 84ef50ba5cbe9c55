"""Who may decide an approval."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runtime.models import Actor

if TYPE_CHECKING:
    from runtime.approval.models import ApprovalRecord

OPERATOR_PLATFORM = "operator"


@dataclass(frozen=True, slots=True)
class ApproverPolicy:
    """Admins may decide anything (also their own requests: the console user is an admin).
    Approvers may decide others' requests; the requester only where `requester_may_approve`
    is set. The operator CLI acts as an admin. One conversation's effective policy gives the
    people (see runtime.policy)."""

    admins: frozenset[str] = frozenset()
    approvers: frozenset[str] = frozenset()
    requester_may_approve: bool = False

    @classmethod
    def of(
        cls,
        admins: Iterable[str] = (),
        approvers: Iterable[str] = (),
        requester_may_approve: bool = False,
    ) -> ApproverPolicy:
        return cls(frozenset(admins), frozenset(approvers), requester_may_approve)

    def is_admin(self, actor: Actor) -> bool:
        return actor.platform == OPERATOR_PLATFORM or actor.key in self.admins

    def refusal(self, actor: Actor, record: ApprovalRecord) -> str | None:
        """None if `actor` may decide `record`, else the reason they may not."""
        if self.is_admin(actor):
            return None
        if actor.key == record.requester.key:
            if self.requester_may_approve:
                return None
            return "you requested this call, and requesters may not approve their own calls here"
        if actor.key not in self.approvers:
            return f"{actor.key} is not an approver for this conversation"
        return None
