"""An approved call is judged again just before it runs: a human approved the call as its
notice showed it, with those reasons. What changed on the disk meanwhile (a plain file
swapped for a symlink to .git/config, a file the command names that became a secret) shows
up as a reason the approver never saw, and then the call does not run."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.approval.store import ApprovalStore
from runtime.risk.policy import RiskDecision, Verdict


def changed_since_approval(approved: Sequence[str], decision: RiskDecision) -> str | None:
    """Why a call approved with the reasons `approved`, judged now as `decision`, may not
    run: reasons it has now and did not have then, or a deny. None when it may run."""
    seen = set(approved)
    new = [reason for reason in decision.reasons if reason not in seen]
    if decision.verdict is Verdict.DENY and not new:
        new = list(decision.reasons) or ["the risk policy refuses it now"]
    if not new:
        return None
    return f"not run: it changed since it was approved ({'; '.join(new)}); ask again"


async def rejudged(store: ApprovalStore, approval_id: str, decision: RiskDecision) -> str | None:
    """`changed_since_approval` against the reasons the approval `approval_id` was decided
    on (re-judging is read-only: a call retaken after a crash is not affected)."""
    reasons = await store.reasons_of(approval_id)
    if reasons is None:
        return "not run: its approval record is gone; ask again"
    return changed_since_approval(reasons, decision)
